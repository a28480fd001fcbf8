package calibrate

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/plan"
)

// formatValue prints v in unit.
func formatValue(v float64, unit string) string {
	switch unit {
	case "ms":
		return fmt.Sprintf("%.3f ms", v)
	case "us":
		return fmt.Sprintf("%.1f us", v)
	case "%":
		return fmt.Sprintf("%.3f%%", v)
	case "Mbit/s":
		return fmt.Sprintf("%.2f Mbit/s", v)
	case "packets":
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g %s", v, unit)
}

// WriteTable writes the report as aligned text tables: the figures
// (configured, measured, tolerance, result), the throughput comparison and
// CPU when measured, the warnings, and a closing verdict naming every
// figure outside its tolerance.
func (r *Report) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "link up %q, down %q, seed %d, cc %s, %d probes per direction and phase\n", r.Up, r.Down, r.Seed, r.CC, r.Packets)
	threads := "normal scheduler (no SCHED_FIFO: less precise on a busy machine)"
	if r.Realtime {
		threads = "SCHED_FIFO"
	}
	fmt.Fprintf(&b, "emulator threads: %s\ntimestamps: %s\n\n", threads, r.Timestamping)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "dir\tfigure\tconfigured\tmeasured\ttolerance\tresult\tnote")
	for _, f := range r.Figures {
		conf := "-"
		if f.Configured != nil {
			conf = formatValue(*f.Configured, f.Unit)
		}
		meas := formatValue(f.Measured, f.Unit)
		if f.Low != nil && f.High != nil {
			meas += fmt.Sprintf(" [%s, %s]", formatValue(*f.Low, f.Unit), formatValue(*f.High, f.Unit))
		}
		dir := f.Direction
		if dir == "" {
			dir = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dir, f.Name, conf, meas, f.Tolerance, f.Status, f.Note)
	}
	tw.Flush()
	if len(r.Goodput) > 0 {
		fmt.Fprintf(&b, "\nbulk goodput, server to client, %s per transfer (first fifth left out):\n", r.Duration)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "protocol\temulated link\tplain veth\temulated/veth\t")
		for _, g := range r.Goodput {
			note := g.Error
			if g.VethReceiveDrops > 0 || g.EmulatedReceiveDrops > 0 {
				note = strings.TrimSpace(fmt.Sprintf("receiver socket dropped %d datagrams (emulated), %d (veth) %s",
					g.EmulatedReceiveDrops, g.VethReceiveDrops, note))
			}
			fmt.Fprintf(tw, "%s\t%.3f Gbit/s\t%.3f Gbit/s\t%.1f%%\t%s\n", g.Proto, g.EmulatedBps/1e9, g.VethBps/1e9, 100*g.Ratio, note)
		}
		tw.Flush()
	}
	if len(r.CPU) > 0 {
		fmt.Fprintf(&b, "\nemulator CPU, %% of one core:\n")
		for _, c := range r.CPU {
			fmt.Fprintf(&b, "  %s: %.1f Mbit/s arrived", c.Load, c.GoodputBps/1e6)
			if c.Error != "" {
				fmt.Fprintf(&b, "; %s", c.Error)
			}
			b.WriteString("\n")
			switch {
			case c.VethGoodputBps > 0:
				fmt.Fprintf(&b, "    emulator's own cost %.1f%%: CPU taken from a soaker %.1f%% through it, %.1f%% for the same over %s (%.1f Mbit/s, scaled)\n",
					c.NetPercent, c.MachinePercent, c.VethMachinePercent, c.Baseline, c.VethGoodputBps/1e6)
			case c.Error == "":
				fmt.Fprintf(&b, "    CPU taken from a soaker %.1f%%, endpoints included (no baseline: nothing here does what this link does without the emulator)\n",
					c.MachinePercent)
			}
			fmt.Fprintf(&b, "    forwarding threads %.1f%% (with the endpoints' kernel work done in their system calls); per wire packet %.2f system calls, %.2f wake-ups\n",
				c.CorePercent, c.SyscallsPerPacket, c.WakeupsPerPacket)
		}
	}
	if len(r.Parallel) > 0 {
		r.writeParallel(&b)
	}
	if len(r.Admitted) > 0 {
		r.writeAdmitted(&b)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(&b, "\nwarning: %s", wn)
	}
	if len(r.Warnings) > 0 {
		b.WriteString("\n")
	}
	if failed := r.Failed(); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, f := range failed {
			names[i] = strings.TrimSpace(f.Direction + " " + f.Name)
		}
		fmt.Fprintf(&b, "\nFAIL: %d figures outside tolerance: %s\n", len(failed), strings.Join(names, "; "))
	} else {
		b.WriteString("\nOK: every judged figure is within its tolerance\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeParallel writes RunParallel's summary: one line per number of
// testbeds and phase.
func (r *Report) writeParallel(b *strings.Builder) {
	fmt.Fprintf(b, "\nparallel testbeds: per-packet delay error (measured - model), us; targets p50 <= %d, p99 <= %d; CPU busy: the machine, all CPUs; this process and its forwarding threads: %% of one core\n",
		TolDelayP50.Microseconds(), TolDelayP99.Microseconds())
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "testbeds\tphase\tprobes\tpooled p50\tpooled p99\tworst p50\tworst p99\tworst testbed\tfloor p50/p99\tmachine late max\tCPU busy\tthis process\tforwarders\tresult")
	for _, p := range r.Parallel {
		for _, ph := range p.Phases {
			res := "ok"
			if !ph.OK {
				res = StatusFail
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%.1f/%.1f\t%.0f\t%.0f%%\t%.0f%%\t%.0f%%\t%s\n",
				p.Testbeds, ph.Phase, ph.Pooled.Probes, ph.Pooled.P50Us, ph.Pooled.P99Us, ph.WorstP50Us, ph.WorstP99Us,
				ph.WorstTestbed, ph.FloorP50Us, ph.FloorP99Us, ph.MachineLateMaxUs, ph.CPUBusyPercent, ph.ProcessCPUPercent, ph.ForwarderCPUPercent, res)
		}
	}
	tw.Flush()
}

// probeLate is the probe testbed's LateOutPercent in an admitted phase
// (its only testbed).
func probeLate(ph ParallelPhase) float64 {
	if len(ph.Testbeds) == 0 {
		return 0
	}
	return ph.Testbeds[0].LateOutPercent
}

// writeAdmitted writes RunAdmitted's summary: one line per number of
// testbeds.
func (r *Report) writeAdmitted(b *strings.Builder) {
	fmt.Fprintf(b, "\nparallel testbeds at the admitted load: the probe testbed's per-packet delay error (measured - model), us, targets p50 <= %d, p99 <= %d, while the others carry bulk downloads (QUIC and TLS in turn) as the admission rule admits them; load in CPUs (predicted: plan.CellLoad; measured: the transfers' processes' CPU x %.1f); machine: CPU busy (all CPUs), timer baseline held back >150 us (%% of the phase) and latest wake-up (us); late: the probe testbed's packets its emulator sent more than %d us after their time (%% of those delivered; a run warns about a sample above 1%%)\n",
		TolDelayP50.Microseconds(), TolDelayP99.Microseconds(), plan.EndpointLoadFactor, emu.LateThreshold/1000)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "testbeds\tloaded (QUIC/TLS)\tload predicted\tmeasured\tbudget\tgoodput/testbed\tprobes\tp50\tp99\tmax\tCPU busy\theld back\tlate max\tlate\tfloor p50/p99\tMB/testbed\tfds/testbed\tthreads/testbed\tresult")
	for _, a := range r.Admitted {
		ph := a.Phase
		res := "ok"
		if !a.OK {
			res = StatusFail
		}
		fmt.Fprintf(tw, "%d\t%d (%d/%d)\t%.2f\t%.2f\t%.2f\t%.2f Mbit/s\t%d\t%.1f\t%.1f\t%.0f\t%.0f%%\t%.2f%%\t%.0f\t%.2f%%\t%.1f/%.1f\t%.1f\t%.1f\t%.1f\t%s\n",
			a.Testbeds, a.Loaded, a.QUIC, a.TLS, a.PredictedCPU, a.MeasuredCPU, a.Budget, a.GoodputMbps, ph.Pooled.Probes,
			ph.Pooled.P50Us, ph.Pooled.P99Us, ph.Pooled.MaxUs, ph.CPUBusyPercent, ph.MachineHeldBackPercent, ph.MachineLateMaxUs,
			probeLate(ph), ph.FloorP50Us, ph.FloorP99Us, a.MemPerTestbedMB, a.FDsPerTestbed, a.ThreadsPerTestbed, res)
	}
	tw.Flush()
}
