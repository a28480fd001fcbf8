package pipeline

import (
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
)

// BenchmarkPipeline measures the cost of one packet through a pipeline:
// Enqueue, plus the Dequeue calls that deliver it (one returning nil, which
// publishes the counters), plus one NextDeadline, as the forwarder does it,
// at 200k packets/s of 1500 bytes (2.4 Gbit/s, the forwarder's target)
// unless the spec's rate is lower. Delivered packets are reused for the next
// arrivals, so the pool's own cost (see emu's BenchmarkPoolGetPut) is left
// out except for dropped packets. ns/op is ns per
// packet (wall clock, inflated when the machine is busy); cpu-ns/op is
// the process's CPU time per packet (getrusage), which other processes on
// the machine do not inflate. allocs/op must be 0.
func BenchmarkPipeline(b *testing.B) {
	for _, bm := range []struct {
		name, spec string
		gap        emu.Time // inter-arrival time
	}{
		{"none", "", 5 * us},
		{"delay", "delay 10ms", 5 * us},
		{"delay+loss", "delay 10ms loss 1%", 5 * us},
		{"delay+loss+rate", "delay 10ms loss 1% rate 2.5gbit", 5 * us},
		{"delay+loss+rate100m", "delay 10ms loss 1% rate 100mbit", 120 * us},
		{"jitter(reordering)", "delay 10ms 2ms", 5 * us},
		{"jitter+normal+corr", "delay 10ms 2ms 25% distribution normal", 5 * us},
		{"jitter+rate", "delay 10ms 2ms rate 2.5gbit", 5 * us},
		{"gemodel+dup+corrupt+reorder", "delay 10ms loss gemodel 1% 10% 70% duplicate 1% corrupt 1% reorder 1%", 5 * us},
		{"codel", "delay 10ms rate 2.5gbit queue codel", 5 * us},
		{"trace", "", 5 * us}, // replaced below
	} {
		b.Run(bm.name, func(b *testing.B) {
			s := bm.spec
			if bm.name == "trace" {
				s = "delay 10ms trace " + writeTrace(b, "0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n0\n1\n") // ~250 Mbit/s
				bm.gap = 50 * us
			}
			l, err := spec.Parse(s)
			if err != nil {
				b.Fatal(err)
			}
			pool := emu.NewPool(16384, 1600)
			p, err := New(l, 1, pool)
			if err != nil {
				b.Fatal(err)
			}
			now := emu.Time(0)
			spare := make([]*emu.Packet, 0, 64)
			step := func() {
				now += bm.gap
				var pkt *emu.Packet
				if n := len(spare); n > 0 {
					pkt, spare = spare[n-1], spare[:n-1]
				} else {
					pkt = pool.Get()
				}
				if pkt != nil {
					pkt.Data = pkt.Data[:1500]
					pkt.Data[0] = 0x45
					p.Enqueue(now, pkt)
				}
				for pkt := p.Dequeue(now); pkt != nil; pkt = p.Dequeue(now) {
					if len(spare) < cap(spare) {
						spare = append(spare, pkt)
					} else {
						pool.Put(pkt)
					}
				}
				p.NextDeadline()
			}
			for i := 0; i < 50_000; i++ { // fill the link: steady state
				step()
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				step()
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(p.Len()), "held")
		})
	}
}

// cpuTime returns the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
