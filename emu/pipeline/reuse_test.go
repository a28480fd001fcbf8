package pipeline

import (
	"runtime"
	"slices"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
)

// allocated returns the bytes fn allocated on the heap.
func allocated(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

func TestNewReusingDecidesLikeNew(t *testing.T) {
	const n = 3000
	for _, s := range []string{
		"delay 10ms 3ms 20% loss 3% duplicate 2% reorder 5% gap 3",
		"delay 5ms 1ms loss 5% rate 5mbit limit 20 onoff 40ms 20ms",
		"loss 1% corrupt 2% trace " + writeTrace(t, "1\n3\n") + " queue codel",
	} {
		l, err := spec.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		// A pipeline that carried traffic, left packets queued, then was
		// retired (flushed) by its driver, as the forwarder does.
		old, pool := build(t, s, 1)
		for i, a := range bursty(500) {
			old.Enqueue(a.at, mkpkt(t, pool, uint64(i), a.size))
		}
		old.Flush()
		if pool.Available() != pool.Cap() {
			t.Fatalf("%s: %d of %d packets back in the pool after Flush", s, pool.Available(), pool.Cap())
		}
		var reused *Pipeline
		bytes := allocated(func() {
			if reused, err = NewReusing(l, 7, pool, old); err != nil {
				t.Fatal(err)
			}
		})
		// A fresh pipeline allocates more than 50 bytes per pool packet
		// (its delay line alone); the reused one none of that.
		if limit := uint64(8 * pool.Cap()); bytes > limit {
			t.Errorf("%s: NewReusing allocated %d bytes, want under %d (queue memory reused)", s, bytes, limit)
		}
		fresh, freshPool := build(t, s, 7)
		var dr, df []decision
		reused.onDecision = func(d decision) { dr = append(dr, d) }
		fresh.onDecision = func(d decision) { df = append(df, d) }
		gotR := drive(t, reused, pool, spread(n), false)
		gotF := drive(t, fresh, freshPool, spread(n), false)
		if len(dr) != n || !slices.Equal(dr, df) {
			t.Fatalf("%s: a reused pipeline decided differently from a fresh one (%d and %d decisions)", s, len(dr), len(df))
		}
		if len(gotR) != len(gotF) {
			t.Fatalf("%s: %d and %d deliveries", s, len(gotR), len(gotF))
		}
		for i := range gotR {
			if gotR[i].at != gotF[i].at || gotR[i].id != gotF[i].id || string(gotR[i].data) != string(gotF[i].data) {
				t.Fatalf("%s: delivery %d differs: %+v vs %+v", s, i, gotR[i], gotF[i])
			}
		}
		checkInvariant(t, reused)
	}
}

func TestNewReusingRefusesALivePipeline(t *testing.T) {
	const s = "delay 10ms"
	l, _ := spec.Parse(s)
	old, pool := build(t, s, 1)
	old.Enqueue(0, mkpkt(t, pool, 1, 100)) // still queued: not retired
	var p *Pipeline
	bytes := allocated(func() { p, _ = NewReusing(l, 1, pool, old) })
	if bytes < uint64(8*pool.Cap()) {
		t.Errorf("NewReusing took the memory of a pipeline holding a packet (allocated only %d bytes)", bytes)
	}
	if old.Len() != 1 || old.Dequeue(10*ms) == nil {
		t.Error("the live pipeline lost its packet")
	}
	// Another pool: not reused either, and the new pipeline works.
	other := emu.NewPool(pool.Cap(), 2048)
	old.Flush()
	bytes = allocated(func() { p, _ = NewReusing(l, 1, other, old) })
	if bytes < uint64(8*other.Cap()) {
		t.Errorf("NewReusing took the memory of a pipeline of another pool (allocated only %d bytes)", bytes)
	}
	if got := drive(t, p, other, spread(10), true); len(got) != 10 {
		t.Errorf("%d packets delivered, want 10", len(got))
	}
}
