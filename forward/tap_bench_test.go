package forward

import (
	"runtime"
	"testing"

	"github.com/quicbench/quicbench/emu/pipeline"
)

// BenchmarkTapRecord measures what the tap costs the forwarding thread per
// wire packet: one record of a 1500-byte packet into the ring (its first
// snap bytes copied). The benchmark drains the ring itself, with the timer
// stopped, every half ring, so that no record is cut. ns/op is wall time
// per packet (inflated on a busy machine), cpu-ns/op the thread's CPU
// time per packet; allocs/op must be 0.
func BenchmarkTapRecord(b *testing.B) {
	pkt := make([]byte, 1500)
	for _, snap := range []int{DefaultSnap, 2048} {
		b.Run(map[int]string{DefaultSnap: "headers", 2048: "whole"}[snap], func(b *testing.B) {
			t, err := newTap(TapOptions{Snap: snap, Slots: 4096}, 2048, false)
			if err != nil {
				b.Fatal(err)
			}
			ev := pipeline.Event{Verdict: pipeline.Delivered, In: 1, At: 2, Data: pkt}
			runtime.LockOSThread() // threadCPU reads this thread's clock
			defer runtime.UnlockOSThread()
			var cpu int64
			b.ReportAllocs()
			b.ResetTimer()
			c0 := threadCPU()
			for i := 0; i < b.N; i++ {
				t.Observe(&ev)
				if i%2048 == 2047 {
					cpu += threadCPU() - c0
					b.StopTimer()
					for r := t.Peek(); r != nil; r = t.Peek() {
						t.Release()
					}
					b.StartTimer()
					c0 = threadCPU()
				}
			}
			cpu += threadCPU() - c0
			b.StopTimer()
			if t.Cut() != 0 {
				b.Fatalf("%d records cut", t.Cut())
			}
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
