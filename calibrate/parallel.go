package calibrate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/sysinfo"
)

// Parallel testbeds (`quicbench calibrate --parallel N`): the emulator's
// delay precision while N testbeds, each with its own namespaces, TUN
// devices and forwarder (its own SCHED_FIFO threads), all in this process
// as `quicbench run --parallel N` builds them, carry traffic at once.
//
// For each N, RunParallel builds N testbeds with the same links, measures
// the veth floor alone, then runs the idle and the loaded probe phase
// (the same phases as Run: probes both ways, and in the loaded phase the
// bulk UDP load next to them) on all N testbeds at the same time, each
// testbed with its own send loop. Every testbed's probes are compared
// with its own seeded model, as in Run; the per-packet errors (measured
// minus model one-way delay) are summarized per testbed and direction and
// pooled over all testbeds and both directions. During each phase more
// probes cross the veth pair (the floor under the same load), the
// machine's timer baseline runs, and the machine's CPU busy share is read
// from /proc/stat (every process on the machine, not only this one).

// MaxParallel is the most testbeds RunParallel builds at once.
const MaxParallel = 64

// floorPPSParallel is the rate of the veth probes sent during a parallel
// phase.
const floorPPSParallel = 2000

// ErrorStats summarizes per-packet delay errors: measured minus model
// one-way delay of each probe that both the link and the model delivered.
type ErrorStats struct {
	Probes int     `json:"probes"`
	P50Us  float64 `json:"p50_us"`
	P99Us  float64 `json:"p99_us"`
	MaxUs  float64 `json:"max_us"`
}

// TestbedPhase is one testbed's share of a parallel phase.
type TestbedPhase struct {
	Name string `json:"name"`
	// Up and Down are the per-packet errors of each direction; Sent and
	// Received count the probes of both directions.
	Up       ErrorStats `json:"up"`
	Down     ErrorStats `json:"down"`
	Sent     int        `json:"sent"`
	Received int        `json:"received"`
	// EmulatorLateMaxUs is the latest wake-up of the testbed's forwarding
	// threads for a departure during the phase (package forward's figure).
	EmulatorLateMaxUs float64 `json:"emulator_late_max_us"`
	// LateOutPercent is the share of the packets the testbed's link
	// delivered during the phase (both directions, probes and load) that
	// its forwarder took out more than emu.LateThreshold after their
	// departure time (emu.Counters.LateOut), in %: what a run's sample is
	// warned about beyond 1% ("emulator late").
	LateOutPercent float64 `json:"late_out_percent"`
	// Failed names the testbed's judged figures of the phase (Run's delay,
	// jitter, loss and reorder rules) outside their tolerance.
	Failed []string `json:"failed,omitempty"`
}

// ParallelPhase is one probe phase run on all testbeds at once.
type ParallelPhase struct {
	Phase string `json:"phase"` // "idle" or "load"
	// LoadBps is the load per testbed and direction (IP bit/s of the up
	// direction) in the loaded phase.
	LoadBps float64 `json:"load_bps,omitempty"`
	Seconds float64 `json:"seconds"`
	// CPUBusyPercent is the machine's busy share over the phase, all CPUs
	// (100 = every CPU busy), from /proc/stat: everything running on the
	// machine, other processes included; -1 when unknown.
	CPUBusyPercent float64 `json:"cpu_busy_percent"`
	StealMs        float64 `json:"steal_ms"`
	// ProcessCPUPercent is this process's CPU time over the phase, in % of
	// one core (getrusage): the N testbeds' forwarders with the kernel work
	// done in their system calls, and the probe senders and receivers.
	ProcessCPUPercent float64 `json:"process_cpu_percent"`
	// ForwarderCPUPercent is the part of it the testbeds' forwarding
	// threads took, summed over the testbeds (schedstat), in % of one core.
	ForwarderCPUPercent float64 `json:"forwarder_cpu_percent"`
	// FloorP50Us and FloorP99Us are the one-way delays of probes over the
	// veth pair sent during the phase: the measurement's own error under
	// the same load.
	FloorP50Us float64 `json:"floor_p50_us"`
	FloorP99Us float64 `json:"floor_p99_us"`
	// MachineLateMaxUs and MachineHeldBackPercent are the machine's timer
	// baseline (a thread sleeping like a forwarding thread): its latest
	// wake-up, and the share of the phase it was held back more than 150 us.
	MachineLateMaxUs       float64 `json:"machine_late_max_us"`
	MachineHeldBackPercent float64 `json:"machine_held_back_percent"`
	// Pooled is over all testbeds and both directions.
	Pooled ErrorStats `json:"pooled"`
	// WorstTestbed is the testbed (and direction) with the highest p99
	// error, WorstP99Us that p99; WorstP50Us is the highest p50 of any
	// testbed and direction.
	WorstTestbed string         `json:"worst_testbed"`
	WorstP50Us   float64        `json:"worst_p50_us"`
	WorstP99Us   float64        `json:"worst_p99_us"`
	Testbeds     []TestbedPhase `json:"testbeds"`
	// OK: pooled and worst p50 within TolDelayP50, p99 within TolDelayP99.
	OK bool `json:"ok"`
}

// ParallelResult is the delay precision of N testbeds active at once.
type ParallelResult struct {
	Testbeds int `json:"testbeds"`
	// FloorP50Us and FloorP99Us are the veth floor measured alone, before
	// the phases.
	FloorP50Us float64         `json:"floor_p50_us"`
	FloorP99Us float64         `json:"floor_p99_us"`
	Phases     []ParallelPhase `json:"phases"`
	OK         bool            `json:"ok"` // every phase OK
}

// ParseParallel parses a --parallel value: a number of testbeds or a
// comma-separated list of them ("1,4,8,16"), each 1 to MaxParallel.
func ParseParallel(s string) ([]int, error) {
	var ns []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number of testbeds", part)
		}
		if n < 1 || n > MaxParallel {
			return nil, fmt.Errorf("%d testbeds: want 1 to %d", n, MaxParallel)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// RunParallel measures the delay precision with N testbeds active at once,
// for each N of ns in turn (see ParallelResult), and removes every testbed
// it built before it returns. The report has Run's header, one
// ParallelResult per N, and judged figures per N and phase (per-packet
// error p50 and p99, pooled and of the worst testbed, against TolDelayP50
// and TolDelayP99), so that Report.Failed names the N that missed. An
// invalid Config or N returns an error before anything is created.
func RunParallel(ctx context.Context, cfg Config, ns []int) (*Report, error) {
	if len(ns) == 0 {
		return nil, errors.New("calibrate: no number of parallel testbeds")
	}
	for _, n := range ns {
		if n < 1 || n > MaxParallel {
			return nil, fmt.Errorf("calibrate: %d parallel testbeds: want 1 to %d", n, MaxParallel)
		}
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	return eachCount(ctx, cfg, ns, runParallel, func(rep *Report, res *ParallelResult) { rep.Parallel = append(rep.Parallel, *res) })
}

// eachCount runs one measurement per testbed count of ns (run, whose
// figures go into the report it is given) and keeps each result (add).
func eachCount[R any](ctx context.Context, cfg Config, ns []int, run func(context.Context, Config, int, *Report) (*R, error), add func(*Report, *R)) (*Report, error) {
	rep := &Report{
		Up: cfg.Up.String(), Down: cfg.Down.String(), Seed: cfg.Seed, CC: cfg.CC,
		Packets: cfg.Packets, Duration: cfg.Duration.String(), Timestamping: timestampingMethod,
		Figures: []Figure{},
	}
	for _, n := range ns {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res, err := run(ctx, cfg, n, rep)
		if err != nil {
			return nil, err
		}
		add(rep, res)
	}
	rep.OK = len(rep.Failed()) == 0
	return rep, nil
}

// runParallel is one N of RunParallel; it adds N's figures and warnings to
// rep.
func runParallel(ctx context.Context, cfg Config, n int, rep *Report) (*ParallelResult, error) {
	progress := cfg.Progress
	say := func(format string, a ...any) {
		if progress != nil {
			fmt.Fprintf(progress, "calibrate: "+format+"\n", a...)
		}
	}
	cfg.Progress = nil
	id := make([]byte, 3)
	_, _ = rand.Read(id)
	say("%d parallel testbeds: building", n)
	runs := make([]*run, 0, n)
	defer func() {
		// Closed concurrently: each close waits for its forwarder.
		var wg sync.WaitGroup
		for _, r := range runs {
			wg.Go(r.close)
		}
		wg.Wait()
	}()
	for i := range n {
		name := fmt.Sprintf("calp%s-%d", hex.EncodeToString(id), i)
		r, err := newRunWith(ctx, cfg, runOptions{name: name, veth: i == 0, timer: i == 0})
		if err != nil {
			return nil, fmt.Errorf("testbed %d of %d: %w", i+1, n, err)
		}
		runs = append(runs, r)
	}
	r0 := runs[0]
	rep.Realtime = r0.rep.Realtime
	res := &ParallelResult{Testbeds: n, OK: true}

	nf := min(cfg.Packets, floorProbes)
	say("%d parallel testbeds: measurement floor, %d probes over a veth pair", n, nf)
	fp := r0.startFloor(nf, time.Second/probeRate)
	r0.runFlows([]*flow{fp.flow})
	time.Sleep(50 * time.Millisecond)
	d, err := fp.finish("floor")
	if err != nil {
		return nil, err
	}
	res.FloorP50Us, res.FloorP99Us = d.p50/1e3, d.p99/1e3

	for _, loaded := range []bool{false, true} {
		ph, err := parallelPhase(runs, loaded, say)
		if err != nil {
			return nil, err
		}
		res.Phases = append(res.Phases, *ph)
		res.OK = res.OK && ph.OK
		rep.Figures = append(rep.Figures, parallelFigures(n, ph)...)
	}
	// The same warning from several testbeds (a host setting) is given once.
	var texts []string
	from := map[string][]string{}
	for _, r := range runs {
		for _, w := range r.rep.Warnings {
			if from[w] == nil {
				texts = append(texts, w)
			}
			from[w] = append(from[w], r.tb.Name())
		}
	}
	for _, w := range texts {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d parallel, testbed %s: %s", n, strings.Join(from[w], ", "), w))
	}
	return res, nil
}

// parallelPhase runs the idle or loaded probe phase on every testbed at
// once, with veth probes beside them, and summarizes it.
func parallelPhase(runs []*run, loaded bool, say func(string, ...any)) (*ParallelPhase, error) {
	r0 := runs[0]
	ps := make([]*probePhase, len(runs))
	for i, r := range runs {
		p, err := r.startProbes(loaded)
		if err != nil {
			for _, q := range ps[:i] {
				_ = q.stop()
			}
			return nil, err
		}
		ps[i] = p
	}
	out := &ParallelPhase{Phase: ps[0].name, LoadBps: ps[0].loads[dirUp], CPUBusyPercent: -1}
	say("%d parallel testbeds: %s phase, %d probes per direction and testbed (%.1f s)", len(runs), out.Phase, r0.cfg.Packets, ps[0].longest)
	nf := max(int(ps[0].longest*floorPPSParallel), 1)
	fp := r0.startFloor(nf, time.Second/floorPPSParallel)

	r0.timer.Take()
	phase0 := time.Now()
	self0 := processCPU()
	fwd0 := forwarderCPU(runs)
	cpu0, cpuErr0 := sysinfo.ReadCPUTimes()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Go(p.send)
	}
	wg.Go(func() { r0.runFlows([]*flow{fp.flow}) })
	wg.Wait()
	machine := r0.timer.Take()
	phaseLen := time.Since(phase0)
	cpu1, cpuErr1 := sysinfo.ReadCPUTimes()
	if self0 >= 0 && phaseLen > 0 {
		out.ProcessCPUPercent = 100 * float64(processCPU()-self0) / float64(phaseLen)
	}
	if phaseLen > 0 {
		out.ForwarderCPUPercent = 100 * float64(forwarderCPU(runs)-fwd0) / float64(phaseLen)
	}
	stolen := time.Duration(-1)
	if cpuErr0 == nil && cpuErr1 == nil {
		stolen = sysinfo.StealBetween(cpu0, cpu1)
		if u := sysinfo.Utilisation(cpu0, cpu1); u >= 0 {
			out.CPUBusyPercent = 100 * u
		}
		out.StealMs = float64(stolen) / 1e6
	}
	out.Seconds = phaseLen.Seconds()
	out.MachineLateMaxUs = float64(machine.LateMaxNs) / 1e3
	if phaseLen > 0 {
		out.MachineHeldBackPercent = 100 * float64(machine.LateOver150SumNs) / float64(phaseLen)
	}

	fd, ferr := fp.finish("floor during the " + out.Phase + " phase")
	var errs []error
	for i, p := range ps {
		m := forward.TimerStats{}
		if i == 0 {
			m = machine
		}
		errs = append(errs, p.finish(m, phaseLen, stolen))
	}
	if err := errors.Join(append(errs, ferr)...); err != nil {
		return nil, err
	}
	out.FloorP50Us, out.FloorP99Us = fd.p50/1e3, fd.p99/1e3

	var pooled []float64
	for i, p := range ps {
		tp := TestbedPhase{Name: runs[i].tb.Name()}
		for _, k := range p.samples {
			tp.Sent += k.s.sent
			tp.Received += k.s.received
			es := errorStats(k.s)
			if k.dir == dirUp {
				tp.Up = es
			} else {
				tp.Down = es
			}
			if k.s.aligned {
				pooled = append(pooled, k.s.errs...)
			}
			dn := dirNames[k.dir]
			if es.Probes > 0 && es.P99Us > out.WorstP99Us {
				out.WorstTestbed, out.WorstP99Us = tp.Name+" "+dn, es.P99Us
			}
			out.WorstP50Us = max(out.WorstP50Us, es.P50Us)
		}
		var late, delivered uint64
		for dir := range 2 {
			tp.EmulatorLateMaxUs = max(tp.EmulatorLateMaxUs, float64(p.after.fwd[dir].LateMaxNs)/1e3)
			d := p.after.link[dir].Sub(p.before.link[dir])
			late, delivered = late+d.LateOut, delivered+d.PacketsOut
		}
		if delivered > 0 {
			tp.LateOutPercent = 100 * float64(late) / float64(delivered)
		}
		for _, f := range p.figures {
			if f.Status == StatusFail {
				tp.Failed = append(tp.Failed, strings.TrimSpace(f.Direction+" "+f.Name))
			}
		}
		out.Testbeds = append(out.Testbeds, tp)
	}
	out.Pooled = summarizeErrors(pooled)
	out.OK = out.Pooled.Probes > 0 && out.Pooled.P50Us <= us(TolDelayP50) && out.Pooled.P99Us <= us(TolDelayP99) &&
		out.WorstP50Us <= us(TolDelayP50) && out.WorstP99Us <= us(TolDelayP99)
	return out, nil
}

// forwarderCPU is the CPU time of every testbed's forwarding threads.
func forwarderCPU(runs []*run) time.Duration {
	var t time.Duration
	for _, r := range runs {
		t += r.tb.ForwarderCPU()
	}
	return t
}

// processCPU is this process's user and system CPU time so far (-1:
// unknown).
func processCPU() time.Duration {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func us(d time.Duration) float64 { return float64(d) / 1e3 }

// errorStats summarizes one sample's per-packet errors; none when the link
// and the model did not deliver the same probes (then errors would compare
// different random draws).
func errorStats(s *probeSample) ErrorStats {
	if !s.aligned {
		return ErrorStats{}
	}
	return summarizeErrors(slices.Clone(s.errs))
}

// summarizeErrors sorts errs (ns) in place and summarizes them in us.
func summarizeErrors(errs []float64) ErrorStats {
	if len(errs) == 0 {
		return ErrorStats{}
	}
	d := summarize(errs)
	return ErrorStats{Probes: d.n, P50Us: d.p50 / 1e3, P99Us: d.p99 / 1e3, MaxUs: d.max / 1e3}
}

// parallelFigures are the judged figures of one N's phase.
func parallelFigures(n int, ph *ParallelPhase) []Figure {
	prefix := fmt.Sprintf("parallel %d, %s: per-packet error ", n, ph.Phase)
	note := fmt.Sprintf("%d testbeds at once; CPU busy %.0f%%; floor during the phase p50 %.1f us, p99 %.1f us",
		n, ph.CPUBusyPercent, ph.FloorP50Us, ph.FloorP99Us)
	fig := func(name string, v float64, tol time.Duration, note string) Figure {
		f := judge(Figure{Name: prefix + name, Unit: "us", Configured: ptr(0), Measured: v, Tolerance: delayTol(tol), Note: note}, us(tol))
		if ph.Pooled.Probes == 0 {
			f.Status, f.Note = StatusFail, "no probe was delivered alike by the link and the seeded model"
		}
		return f
	}
	return []Figure{
		fig("p50 pooled", ph.Pooled.P50Us, TolDelayP50, fmt.Sprintf("%d probes; %s", ph.Pooled.Probes, note)),
		fig("p99 pooled", ph.Pooled.P99Us, TolDelayP99, ""),
		fig("p50 worst testbed", ph.WorstP50Us, TolDelayP50, ""),
		fig("p99 worst testbed", ph.WorstP99Us, TolDelayP99, ph.WorstTestbed),
	}
}
