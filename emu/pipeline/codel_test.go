package pipeline

import (
	"testing"

	"github.com/quicbench/quicbench/emu"
)

// TestCoDelFirstDrop follows RFC 8289 on a standing queue: 200 packets of
// 1500 bytes arrive at once on a 12 Mbit/s link (1 ms each). Packet i starts
// transmitting at i ms with a sojourn time of i ms. At 5 ms the sojourn
// reaches the target, so CoDel arms first_above_time = 105 ms; at 105 ms it
// drops packet 105 and sends 106, and its next drop (205 ms) comes after the
// queue has drained. Drop-tail drops nothing.
func TestCoDelFirstDrop(t *testing.T) {
	p, pool := build(t, "rate 12mbit queue codel", 1)
	got := drive(t, p, pool, every(200, 0, 0, 1500), false)
	if len(got) != 199 || p.Counters().DropQueue != 1 {
		t.Fatalf("delivered %d, dropped %d; want 199 and 1", len(got), p.Counters().DropQueue)
	}
	for i, d := range got {
		want := uint64(i)
		if i >= 105 {
			want++
		}
		if d.id != want {
			t.Fatalf("delivery %d is packet %d, want %d (CoDel must drop packet 105)", i, d.id, want)
		}
		if d.at != emu.Time(i+1)*ms {
			t.Fatalf("delivery %d at %d, want %d", i, d.at, emu.Time(i+1)*ms)
		}
	}
	checkInvariant(t, p)

	p, pool = build(t, "rate 12mbit", 1)
	if got := drive(t, p, pool, every(200, 0, 0, 1500), true); len(got) != 200 {
		t.Fatalf("drop-tail delivered %d of 200", len(got))
	}
}

// TestCoDelControlsAStandingQueue offers 10% more than the link carries for
// 30 s. Drop-tail fills its 1000 packets (a 1 s queue); CoDel, whose drop
// rate ramps up to the excess, keeps the queue an order of magnitude shorter
// even for this unresponsive traffic (about 32 ms here).
func TestCoDelControlsAStandingQueue(t *testing.T) {
	arr := every(33_334, 0, 900*us, 1500) // 1500 bytes every 0.9 ms on a 1 ms link
	meanLastThird := func(s string) (float64, uint64) {
		p, pool := build(t, s, 1)
		got := drive(t, p, pool, arr, false)
		var sum float64
		n := 0
		for _, d := range got {
			if d.at > 20_000*ms {
				sum += float64(d.at - arr[d.id].at)
				n++
			}
		}
		checkInvariant(t, p)
		return sum / float64(n), p.Counters().DropQueue
	}
	tail, tailDrops := meanLastThird("rate 12mbit")
	codel, codelDrops := meanLastThird("rate 12mbit queue codel")
	t.Logf("mean delay over the last 10 s: drop-tail %.1f ms (%d drops), codel %.1f ms (%d drops)",
		tail/1e6, tailDrops, codel/1e6, codelDrops)
	if tail < float64(900*ms) {
		t.Errorf("drop-tail mean delay %.1f ms, want about 1 s (a full 1000-packet queue)", tail/1e6)
	}
	if codel > float64(60*ms) {
		t.Errorf("codel mean delay %.1f ms, want well under drop-tail's", codel/1e6)
	}
	if codelDrops <= tailDrops/2 {
		t.Errorf("codel dropped %d, drop-tail %d: both must shed the 10%% excess", codelDrops, tailDrops)
	}
}

func TestCoDelParameters(t *testing.T) {
	// A larger target arms later: first drop at 20 + 50 ms with target 20ms
	// and interval 50ms.
	_, got := deliverN(t, "rate 12mbit queue codel target 20ms interval 50ms", every(100, 0, 0, 1500), false, 99)
	for i, d := range got {
		if i < 70 && d.id != uint64(i) || i >= 70 && d.id != uint64(i+1) {
			t.Fatalf("delivery %d is packet %d: want packet 70 dropped", i, d.id)
		}
	}
}
