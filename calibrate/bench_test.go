package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

// The link emulator's fidelity and speed targets as benchmarks (root):
//
//	go test -run '^$' -bench . -benchtime 1x ./calibrate/
//
// Each iteration is a complete measurement; the metrics are the worst over
// iterations and directions.

func runFor(b *testing.B, link string, packets int, d time.Duration) *Report {
	b.Helper()
	l := mustParse(b, link)
	rep, err := Run(context.Background(), Config{Up: l, Down: l, Seed: 1, Packets: packets, Duration: d})
	if err != nil {
		b.Fatal(err)
	}
	for _, w := range rep.Warnings {
		b.Log("warning: ", w)
	}
	return rep
}

// worst returns the largest |measured - configured| (in the figure's unit)
// of the named figure over both directions.
func worst(r *Report, name string) float64 {
	w := 0.0
	for _, f := range r.Figures {
		if f.Name == name && f.Configured != nil {
			w = max(w, math.Abs(f.Measured-*f.Configured))
		}
	}
	return w
}

func measured(r *Report, dir, name string) (float64, bool) {
	for _, f := range r.Figures {
		if f.Direction == dir && f.Name == name {
			return f.Measured, true
		}
	}
	return 0, false
}

// BenchmarkDelayPrecision: `delay 25ms`, 20,000 probes per direction, idle
// and under 100 Mbit/s of load. Targets: p50 within 50 us, p99 within
// 150 us of 25 ms.
func BenchmarkDelayPrecision(b *testing.B) {
	requireRoot(b)
	var p50, p99, lp50, lp99, f50, f99, machine float64
	for b.Loop() {
		r := runFor(b, "delay 25ms", 20000, time.Second)
		p50 = max(p50, 1e3*worst(r, "delay p50 idle"))
		p99 = max(p99, 1e3*worst(r, "delay p99 idle"))
		lp50 = max(lp50, 1e3*worst(r, "delay p50 under 100 Mbit/s load"))
		lp99 = max(lp99, 1e3*worst(r, "delay p99 under 100 Mbit/s load"))
		v50, _ := measured(r, "", "floor: one-way delay over veth p50")
		v99, _ := measured(r, "", "floor: one-way delay over veth p99")
		f50, f99 = max(f50, v50), max(f99, v99)
		for _, phase := range []string{"idle", "loaded"} {
			m, _ := measured(r, "", "machine timer wake-up lateness max "+phase)
			machine = max(machine, m)
		}
	}
	b.ReportMetric(p50, "p50-err-us")
	b.ReportMetric(p99, "p99-err-us")
	b.ReportMetric(lp50, "load-p50-err-us")
	b.ReportMetric(lp99, "load-p99-err-us")
	b.ReportMetric(f50, "floor-p50-us")
	b.ReportMetric(f99, "floor-p99-us")
	// The machine's own worst timer wake-up during the probe phases (the
	// baseline thread of calibrate): the emulator cannot do better.
	b.ReportMetric(machine, "machine-late-max-us")
}

// BenchmarkDeliveredRate: the delivered rate of a saturated link, as a
// percentage of the configured rate (target: 98 to 102).
func BenchmarkDeliveredRate(b *testing.B) {
	requireRoot(b)
	for _, rate := range []string{"10mbit", "100mbit", "1gbit"} {
		b.Run(rate, func(b *testing.B) {
			low, high := math.Inf(1), 0.0
			var mbps float64
			for b.Loop() {
				r := runFor(b, "rate "+rate, 200, 3*time.Second)
				for _, f := range r.Figures {
					if f.Name == "delivered rate" {
						pct := 100 * f.Measured / *f.Configured
						low, high = min(low, pct), max(high, pct)
						mbps = f.Measured
					}
				}
			}
			b.ReportMetric(low, "min-pct-of-rate")
			b.ReportMetric(high, "max-pct-of-rate")
			b.ReportMetric(mbps, "Mbit/s")
		})
	}
}

// BenchmarkLossInterval: measured loss and its 95% interval over 20,000
// probes per direction (up direction reported; seed 1).
func BenchmarkLossInterval(b *testing.B) {
	requireRoot(b)
	for _, loss := range []string{"2%", "5%"} {
		b.Run(loss, func(b *testing.B) {
			var f Figure
			for b.Loop() {
				r := runFor(b, "loss "+loss, 20000, time.Second)
				for _, g := range r.Figures {
					if g.Direction == "up" && g.Name == "loss" {
						f = g
					}
				}
			}
			if f.Low == nil {
				b.Fatal("no loss figure")
			}
			b.ReportMetric(f.Measured, "loss-%")
			b.ReportMetric(*f.Low, "ci95-low-%")
			b.ReportMetric(*f.High, "ci95-high-%")
		})
	}
}

// throughputRun builds a `delay 10ms` testbed, a veth pair and the bulk
// servers, shared by the sub-benchmarks.
func throughputRun(b *testing.B, d time.Duration) (*run, *bulkEnds) {
	b.Helper()
	requireRoot(b)
	l := mustParse(b, "delay 10ms")
	r, err := newRun(context.Background(), Config{Up: l, Down: l, Seed: 1, Duration: d})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(r.close)
	ends, err := r.startBulkEnds()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ends.Close() })
	return r, ends
}

// BenchmarkThroughput: bulk goodput with `delay 10ms` each way through the
// emulator and over a plain veth pair, one 3 s transfer each per iteration.
// Targets: kernel TCP >= 2 Gbit/s through the emulator; quic-go >= 80% of
// its veth goodput.
func BenchmarkThroughput(b *testing.B) {
	r, ends := throughputRun(b, 3*time.Second)
	for _, p := range bulkProtos {
		b.Run(p, func(b *testing.B) {
			var emu, veth float64
			var drops uint64
			n := 0
			for b.Loop() {
				g := r.compare(ends, p)
				if g.Error != "" {
					b.Fatal(g.Error)
				}
				emu, veth = emu+g.EmulatedBps, veth+g.VethBps
				drops += g.EmulatedReceiveDrops
				n++
			}
			b.ReportMetric(emu/float64(n)/1e9, "emu-Gbit/s")
			b.ReportMetric(veth/float64(n)/1e9, "veth-Gbit/s")
			b.ReportMetric(100*emu/veth, "emu/veth-%")
			if p == protoQUIC {
				// Datagrams the client's socket buffer overflowed on, per
				// transfer through the emulator (quic-go's own drops, when
				// its queue of unprocessed packets is full, are not
				// counted here: see scripts/bench.sh quic-queue).
				b.ReportMetric(float64(drops)/float64(n), "emu-rcvbuf-drops")
			}
		})
	}
}

// BenchmarkEmulatorCPU: what the emulator costs while it carries
// 100 Mbit/s (target: at most 15% of one core), one sub-benchmark per
// figure of calibrate's CPU phase (bulk.go, run.cpu): paced TCP and UDP
// datagrams through an unimpaired link and unpaced TCP through "rate
// 100mbit", each next to the same over veth (shaped by tbf for the rate),
// and paced TCP through `delay 10ms` each way (no baseline). taken-pct is
// the CPU taken from a soaker through the emulator, base-taken-pct over the
// baseline, net-pct their difference (the baseline scaled to the same
// goodput): the emulator's own cost. threads-pct is the forwarding
// threads' CPU, which includes the endpoints' kernel work done inside their
// system calls. syscalls/pkt and wakeups/pkt count the forwarder's system
// calls per wire packet: figures a busy machine does not change. Each
// figure is the worst iteration's.
func BenchmarkEmulatorCPU(b *testing.B) {
	r, ends := throughputRun(b, 3*time.Second)
	figures, err := r.cpuFigures(ends)
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range figures {
		b.Run(f.name, func(b *testing.B) {
			worst := CPU{NetPercent: math.Inf(-1)}
			for b.Loop() {
				c, err := r.takeCPU(f)
				if err == nil && c.Error != "" {
					err = errors.New(c.Error)
				}
				if err != nil {
					b.Fatal(err)
				}
				worst.CorePercent = max(worst.CorePercent, c.CorePercent)
				worst.MachinePercent = max(worst.MachinePercent, c.MachinePercent)
				worst.VethMachinePercent = max(worst.VethMachinePercent, c.VethMachinePercent)
				worst.NetPercent = max(worst.NetPercent, c.NetPercent)
				worst.SyscallsPerPacket = max(worst.SyscallsPerPacket, c.SyscallsPerPacket)
				worst.WakeupsPerPacket = max(worst.WakeupsPerPacket, c.WakeupsPerPacket)
				worst.Baseline = c.Baseline
			}
			b.ReportMetric(worst.CorePercent, "threads-pct")
			b.ReportMetric(worst.MachinePercent, "taken-pct")
			if worst.Baseline != "" {
				b.ReportMetric(worst.VethMachinePercent, "base-taken-pct")
				b.ReportMetric(worst.NetPercent, "net-pct")
			}
			b.ReportMetric(worst.SyscallsPerPacket, "syscalls/pkt")
			b.ReportMetric(worst.WakeupsPerPacket, "wakeups/pkt")
		})
	}
}

// BenchmarkReplay is the model replay's cost per packet (it runs after
// every probe phase).
func BenchmarkReplay(b *testing.B) {
	l := mustParse(b, "delay 25ms 1ms loss 1% rate 100mbit")
	recs := probeRecs(20000, 100*time.Microsecond)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := replay(l, 1, recs, len(recs)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/packet")
}

// BenchmarkParallelDelayPrecision: the per-packet delay error with N
// testbeds running the idle and loaded probe phases at once (RunParallel),
// `delay 25ms rate 10mbit` each way, 5,000 probes per direction and
// testbed. Targets, pooled and for the worst testbed: p50 within 50 us,
// p99 within 150 us. Metrics are the worst over iterations and phases;
// cpu-busy-pct is the machine's busy share during the phases (every
// process, /proc/stat).
func BenchmarkParallelDelayPrecision(b *testing.B) {
	requireRoot(b)
	l := mustParse(b, "delay 25ms rate 10mbit")
	for _, n := range []int{1, 4, 8, 16} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			var p50, p99, w50, w99, f99, busy float64
			for b.Loop() {
				rep, err := RunParallel(context.Background(), Config{Up: l, Down: l, Seed: 1, Packets: 5000}, []int{n})
				if err != nil {
					b.Fatal(err)
				}
				for _, ph := range rep.Parallel[0].Phases {
					p50, p99 = max(p50, ph.Pooled.P50Us), max(p99, ph.Pooled.P99Us)
					w50, w99 = max(w50, ph.WorstP50Us), max(w99, ph.WorstP99Us)
					f99, busy = max(f99, ph.FloorP99Us), max(busy, ph.CPUBusyPercent)
				}
			}
			b.ReportMetric(p50, "p50-err-us")
			b.ReportMetric(p99, "p99-err-us")
			b.ReportMetric(w50, "worst-p50-err-us")
			b.ReportMetric(w99, "worst-p99-err-us")
			b.ReportMetric(f99, "floor-p99-us")
			b.ReportMetric(busy, "cpu-busy-pct")
		})
	}
}
