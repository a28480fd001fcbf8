package calibrate

import (
	"slices"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
)

// probeRecs is n probes spaced by gap, starting at 1 s.
func probeRecs(n int, gap time.Duration) []sendRec {
	recs := make([]sendRec, n)
	for i := range recs {
		recs[i] = sendRec{t: int64(time.Second) + int64(i)*int64(gap), size: probePayload + ipUDPOverhead, probe: int32(i)}
	}
	return recs
}

func mustReplay(t *testing.T, link string, seed uint64, recs []sendRec, probes int) *modelResult {
	t.Helper()
	l, err := spec.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	m, err := replay(l, seed, recs, probes)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReplayDelayAndRate(t *testing.T) {
	recs := probeRecs(100, time.Millisecond)
	// 92 bytes at 8 Mbit/s take exactly 92 us on the wire.
	m := mustReplay(t, "delay 10ms rate 8mbit", 1, recs, 100)
	for i, r := range recs {
		if want := r.t + int64(10*time.Millisecond+92*time.Microsecond); m.first[i] != want || m.copies[i] != 1 {
			t.Fatalf("probe %d: delivered at %d (%d copies), want %d", i, m.first[i], m.copies[i], want)
		}
	}
	if m.delivered != 100 || m.late != 0 {
		t.Fatalf("delivered %d, late %d", m.delivered, m.late)
	}
}

func TestReplayQueueBehindLoad(t *testing.T) {
	// A 1500-byte load packet at 12 Mbit/s takes 1 ms; a probe right behind
	// it waits for it: 1 ms + its own 61.333 us.
	recs := []sendRec{
		{t: 1e9, size: 1500, probe: -1},
		{t: 1e9, size: 92, probe: 0},
	}
	m := mustReplay(t, "rate 12mbit", 1, recs, 1)
	want := int64(1e9) + int64(time.Millisecond) + 61333
	if m.first[0] < want || m.first[0] > want+1 {
		t.Fatalf("probe behind a load packet delivered at %d, want %d", m.first[0], want)
	}
}

func TestReplaySeedDeterminism(t *testing.T) {
	recs := probeRecs(5000, 100*time.Microsecond)
	a := mustReplay(t, "delay 5ms 1ms loss 10%", 7, recs, 5000)
	b := mustReplay(t, "delay 5ms 1ms loss 10%", 7, recs, 5000)
	c := mustReplay(t, "delay 5ms 1ms loss 10%", 8, recs, 5000)
	if !slices.Equal(a.first, b.first) || !slices.Equal(a.copies, b.copies) {
		t.Fatal("the same seed gave different per-packet results")
	}
	if slices.Equal(a.copies, c.copies) {
		t.Fatal("seeds 7 and 8 lost the same probes")
	}
	if lost := 5000 - a.delivered; lost < 400 || lost > 600 {
		t.Fatalf("loss 10%% lost %d of 5000", lost)
	}
	// Jitter of ±1 ms on probes 100 us apart reorders many of them.
	if a.late == 0 {
		t.Fatal("no late probes with jitter much larger than the spacing")
	}
	// Load packets take decisions too: interleaving them changes which
	// probes are lost.
	var mixed []sendRec
	for _, r := range recs {
		mixed = append(mixed, r, sendRec{t: r.t, size: 1500, probe: -1})
	}
	d := mustReplay(t, "delay 5ms 1ms loss 10%", 7, mixed, 5000)
	if slices.Equal(a.copies, d.copies) {
		t.Fatal("load packets did not consume loss decisions")
	}
}

func TestReplayDuplicateCorrupt(t *testing.T) {
	recs := probeRecs(50, time.Millisecond)
	m := mustReplay(t, "delay 1ms duplicate 100%", 1, recs, 50)
	for i := range 50 {
		if m.copies[i] != 2 {
			t.Fatalf("duplicate 100%%: probe %d has %d copies", i, m.copies[i])
		}
	}
	m = mustReplay(t, "delay 1ms corrupt 100%", 1, recs, 50)
	if m.delivered != 0 {
		t.Fatalf("corrupt 100%%: %d probes arrived intact", m.delivered)
	}
}

func TestReplayReorder(t *testing.T) {
	// Every second probe skips the 10 ms delay; probes are 1 ms apart, so
	// every delayed probe is overtaken by a later early one, except those
	// sent in the last 10 ms.
	const n = 200
	recs := probeRecs(n, time.Millisecond)
	m := mustReplay(t, "delay 10ms reorder 100% gap 2", 1, recs, n)
	early := 0
	for i, r := range recs {
		if m.first[i]-r.t < int64(5*time.Millisecond) {
			early++
		}
	}
	if early < n/2-1 || early > n/2+1 {
		t.Fatalf("%d of %d probes early, want half", early, n)
	}
	if m.late < n/2-12 || m.late > n/2 {
		t.Fatalf("%d late probes, want about %d", m.late, n/2)
	}
}

func TestReplayGrowsPool(t *testing.T) {
	// 10,000 probes in flight at once need more than the first pool.
	const n = 10000
	recs := probeRecs(n, 10*time.Microsecond)
	m := mustReplay(t, "delay 1s", 1, recs, n)
	if m.delivered != n {
		t.Fatalf("delivered %d of %d", m.delivered, n)
	}
	for i, r := range recs {
		if m.first[i] != r.t+int64(time.Second) {
			t.Fatalf("probe %d delivered after %d ns", i, m.first[i]-r.t)
		}
	}
}
