package pipeline

import (
	"math/rand/v2"
	"testing"

	"github.com/quicbench/quicbench/emu"
)

func TestEntryHeapOrder(t *testing.T) {
	h := newEntryHeap(0)
	r := rand.New(rand.NewPCG(1, 2))
	var seq uint64
	for round := 0; round < 50; round++ {
		for i := 0; i < 1+r.IntN(200); i++ {
			h.push(entry{out: emu.Time(r.IntN(1000)), seq: seq})
			seq++
		}
		var prev entry
		for i := 0; i < r.IntN(h.len()+1); i++ {
			e := h.pop()
			if i > 0 && before(&e, &prev) {
				t.Fatalf("popped %+v after %+v", e, prev)
			}
			prev = e
		}
	}
}

func BenchmarkEntryHeap(b *testing.B) {
	h := newEntryHeap(4096)
	r := rand.New(rand.NewPCG(1, 2))
	now := emu.Time(0)
	var seq uint64
	for i := 0; i < 2000; i++ {
		h.push(entry{out: now + emu.Time(r.IntN(4_000_000)), seq: seq})
		seq++
	}
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		now += 2000
		h.push(entry{out: now + emu.Time(r.IntN(4_000_000)), seq: seq})
		seq++
		h.pop()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
