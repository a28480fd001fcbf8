package pipeline

import (
	"cmp"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/emu"
)

// record builds a pipeline for s with seed and records every decision.
func record(t *testing.T, s string, seed uint64) (*Pipeline, *emu.Pool, *[]decision) {
	p, pool := build(t, s, seed)
	var ds []decision
	p.onDecision = func(d decision) { ds = append(ds, d) }
	return p, pool, &ds
}

// bursty offers n packets in bursts of 50, one burst per second, and
// dequeues at deadlines; spread offers one packet every 37 us and dequeues
// only every 3 ms: the same packets at very different times.
func bursty(n int) []arrival {
	a := make([]arrival, n)
	for i := range a {
		a[i] = arrival{at: emu.Time(i/50) * 1000 * ms, id: uint64(i), size: 100 + i%1300}
	}
	return a
}

func spread(n int) []arrival {
	a := make([]arrival, n)
	for i := range a {
		a[i] = arrival{at: 5*ms + emu.Time(i)*37*us, id: uint64(i), size: 100 + i%1300}
	}
	return a
}

// driveLazily enqueues the arrivals and dequeues only every 3 ms.
func driveLazily(t *testing.T, p *Pipeline, pool *emu.Pool, arr []arrival) []delivery {
	var out []delivery
	next := emu.Time(0)
	collect := func(now emu.Time) {
		for pkt := p.Dequeue(now); pkt != nil; pkt = p.Dequeue(now) {
			out = append(out, delivery{at: now, id: idOf(pkt), data: append([]byte(nil), pkt.Data...)})
			pool.Put(pkt)
		}
	}
	for _, a := range arr {
		for next <= a.at {
			collect(next)
			next += 3 * ms
		}
		p.Enqueue(a.at, mkpkt(t, pool, a.id, a.size))
	}
	for p.Len() > 0 {
		collect(next)
		next += 3 * ms
	}
	return out
}

// TestSameSeedSameDecisions is the property paired runs rely on: the k-th
// packet gets the same loss, duplicate, corrupt, reorder and delay
// decisions from two pipelines with the same seed, however differently the
// packets are timed; another seed gives other decisions.
func TestSameSeedSameDecisions(t *testing.T) {
	const n = 5000
	for _, s := range []string{
		"delay 10ms 3ms 20% distribution normal loss 3% 10% duplicate 2% corrupt 1% reorder 5% gap 3",
		"delay 20ms 5ms distribution pareto loss gemodel 2% 20% 80% 0.5%",
		"loss state 2% 50% 10% 20% 1% delay 1ms 1ms distribution paretonormal",
		// Timing-dependent drops (queue, blackout) must not shift the
		// random decisions of later packets.
		"delay 5ms 1ms loss 5% duplicate 5% rate 5mbit limit 20 onoff 40ms 20ms",
		"loss 1% corrupt 2% trace " + writeTrace(t, "1\n3\n") + " queue codel",
	} {
		a, poolA, da := record(t, s, 2024)
		b, poolB, db := record(t, s, 2024)
		e, poolE, de := record(t, s, 2024)
		c, poolC, dc := record(t, s, 2025)
		gotA := drive(t, a, poolA, bursty(n), false)
		driveLazily(t, b, poolB, spread(n))
		gotE := drive(t, e, poolE, spread(n), false)
		drive(t, c, poolC, bursty(n), false)
		if len(*da) != n || len(*db) != n || len(*de) != n {
			t.Fatalf("%s: %d, %d and %d decisions recorded, want %d", s, len(*da), len(*db), len(*de), n)
		}
		for k := range *da {
			if (*da)[k] != (*db)[k] || (*da)[k] != (*de)[k] {
				t.Fatalf("%s: packet %d decided differently:\n  %+v\n  %+v\n  %+v", s, k, (*da)[k], (*db)[k], (*de)[k])
			}
		}
		if slices.Equal(*da, *dc) {
			t.Fatalf("%s: seeds 2024 and 2025 gave the same decisions", s)
		}
		for _, p := range []*Pipeline{a, b, c, e} {
			checkInvariant(t, p)
		}

		// Without timing-dependent drops the outcome is identical too: the
		// same packets arrive, with the same bytes (corruption included)
		// and the same one-way delays.
		if a.bn.kind == bnNone && a.onoff.cycle == 0 {
			sameOutcome(t, s, bursty(n), gotA, spread(n), gotE)
		}
	}
}

func sameOutcome(t *testing.T, s string, arrA []arrival, gotA []delivery, arrB []arrival, gotB []delivery) {
	type copyOf struct {
		delay emu.Time
		data  string
	}
	outcome := func(arr []arrival, got []delivery) map[uint64][]copyOf {
		m := map[uint64][]copyOf{}
		for _, d := range got {
			m[d.id] = append(m[d.id], copyOf{d.at - arr[d.id].at, string(d.data)})
		}
		for _, v := range m {
			slices.SortFunc(v, func(x, y copyOf) int {
				if c := cmp.Compare(x.delay, y.delay); c != 0 {
					return c
				}
				return strings.Compare(x.data, y.data)
			})
		}
		return m
	}
	oa, ob := outcome(arrA, gotA), outcome(arrB, gotB)
	if len(oa) != len(ob) || len(oa) == 0 {
		t.Fatalf("%s: %d packets delivered in one run, %d in the other", s, len(oa), len(ob))
	}
	for id, ca := range oa {
		if !slices.Equal(ca, ob[id]) {
			t.Fatalf("%s: packet %d: delays or bytes differ between the runs", s, id)
		}
	}
}
