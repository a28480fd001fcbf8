package pipeline

import (
	"fmt"
	"math"
	"testing"

	"github.com/quicbench/quicbench/emu"
)

func TestOnOffDropsArrivalsDuringBlackout(t *testing.T) {
	// ON 100 ms, OFF 50 ms from the first packet (at 0): arrivals in
	// [100, 150) and [250, 300) ms are dropped.
	p, pool := build(t, "onoff 100ms 50ms", 1)
	arr := every(300, 0, ms, 100)
	got := drive(t, p, pool, arr, true)
	if len(got) != 200 || p.Counters().DropOff != 100 {
		t.Fatalf("delivered %d, DropOff %d; want 200 and 100", len(got), p.Counters().DropOff)
	}
	for _, d := range got {
		if at := arr[d.id].at; at >= 100*ms && at < 150*ms || at >= 250*ms {
			t.Fatalf("packet %d sent at %d (a blackout) was delivered", d.id, at)
		}
	}
	checkInvariant(t, p)
}

func TestOnOffPhaseStartsAtFirstPacket(t *testing.T) {
	p, pool := build(t, "onoff 10ms 10ms", 1)
	start := emu.Time(123456789)
	got := drive(t, p, pool, []arrival{{start, 0, 100}, {start + 9*ms, 1, 100}, {start + 10*ms, 2, 100}, {start + 20*ms, 3, 100}}, true)
	if len(got) != 3 || got[2].id != 3 {
		t.Fatalf("deliveries %v: want packets 0, 1 and 3", got)
	}
}

func TestOnOffPausesTheBottleneck(t *testing.T) {
	// 120 packets of 1 ms each at 0: the first 100 start in the ON period,
	// then transmission pauses for the 50 ms blackout and resumes at 150 ms.
	_, got := deliverN(t, "rate 12mbit onoff 100ms 50ms", every(120, 0, 0, 1500), true, 120)
	for i, d := range got {
		want := emu.Time(i+1) * ms
		if i >= 100 {
			want += 50 * ms
		}
		if d.at != want {
			t.Fatalf("packet %d delivered at %d, want %d", i, d.at, want)
		}
	}
	// A trace's opportunities during a blackout are skipped.
	p, pool := build(t, fmt.Sprintf("trace %s onoff 3ms 2ms", writeTrace(t, "1\n")), 1)
	got = drive(t, p, pool, every(6, 0, 0, 1500), true)
	// Opportunities at 1, 2 (ON), 3, 4 (OFF), 5, 6, 7 (ON), 8, 9 (OFF), 10.
	equalTimes(t, "trace+onoff", deliveryTimes(got), []emu.Time{1 * ms, 2 * ms, 5 * ms, 6 * ms, 7 * ms, 10 * ms})
}

// TestTraceOnOffSearchIsBounded: against a 1 ns ON window, a trace's
// millisecond opportunities fall in an ON window only when the onoff cycle
// (1000000001 ns) and the trace period align, here after a million cycles
// (about 11.6 days). Each NextDeadline must examine at most maxOppSearch
// opportunities and return an early deadline that moves on, and driving the
// pipeline from deadline to deadline must deliver the packet at exactly the
// first opportunity in an ON window. Without the bound, NextDeadline walks
// the million cycles in one call.
func TestTraceOnOffSearchIsBounded(t *testing.T) {
	if maxOppSearch > 4096 {
		t.Fatalf("maxOppSearch %d: NextDeadline must do little work per call", maxOppSearch)
	}
	const cycle = 1_000_000_001 // ns: onoff 1ns 1000000000ns
	p, pool := build(t, fmt.Sprintf("trace %s onoff 1ns 1000000000ns", writeTrace(t, "1\n")), 1)
	p.Enqueue(0, mkpkt(t, pool, 7, 1500))
	// Opportunities at m ms are ON when m*1e6 is a multiple of the cycle:
	// gcd(1e6, cycle) = 1, so first at m = cycle.
	want := emu.Time(1_000_000 * cycle)
	prev := emu.Time(-1)
	wakeups := 0
	for {
		dl, ok := p.NextDeadline()
		if !ok {
			t.Fatalf("packet lost after %d wake-ups", wakeups)
		}
		if s := p.bn.searched; s > maxOppSearch {
			t.Fatalf("NextDeadline examined %d opportunities, at most %d allowed", s, maxOppSearch)
		}
		if dl <= prev {
			t.Fatalf("deadline %d does not advance past %d: the driver would spin", dl, prev)
		}
		if dl > want {
			t.Fatalf("deadline %d is past the delivery %d", dl, want)
		}
		prev = dl
		wakeups++
		if pkt := p.Dequeue(dl); pkt != nil {
			if dl != want || idOf(pkt) != 7 {
				t.Fatalf("packet %d delivered at %d, want packet 7 at %d", idOf(pkt), dl, want)
			}
			pool.Put(pkt)
			break
		}
		if wakeups > 1_000_000/(maxOppSearch/2) {
			t.Fatalf("%d wake-ups without a delivery: deadlines advance too slowly", wakeups)
		}
	}
	if wakeups < 1_000_000/(2*maxOppSearch) {
		t.Fatalf("%d wake-ups: the search examined more than maxOppSearch cycles per call", wakeups)
	}
	checkInvariant(t, p)

	// A 1e12 ms-period-scale case: one opportunity every 1e6 s meets the
	// 1 ns ON window only after ~1e9 periods (beyond int64 nanoseconds).
	// NextDeadline must still return at once, with a finite early deadline.
	p, pool = build(t, fmt.Sprintf("trace %s onoff 1ns 1000000000ns", writeTrace(t, "1000000000\n")), 1)
	p.Enqueue(0, mkpkt(t, pool, 1, 1500))
	dl, ok := p.NextDeadline()
	if !ok || dl <= 0 || p.bn.searched != maxOppSearch {
		t.Fatalf("NextDeadline = %d, %v after examining %d opportunities; want an early deadline after %d", dl, ok, p.bn.searched, maxOppSearch)
	}
	if pkt := p.Dequeue(dl); pkt != nil {
		t.Fatalf("packet delivered at %d during a blackout", dl)
	}
	if next, ok := p.NextDeadline(); !ok || next <= dl {
		t.Fatalf("second deadline %d (%v) does not advance past %d", next, ok, dl)
	}

	// With the longest trace period (1e12 ms), the search leaves the int64
	// nanosecond range after 9 periods: the packet is held, the deadline is
	// the end of time rather than a wrapped-around one.
	p, pool = build(t, fmt.Sprintf("trace %s onoff 1ns 1000000000ns", writeTrace(t, "1000000000000\n")), 1)
	p.Enqueue(5, mkpkt(t, pool, 1, 1500))
	if dl, ok := p.NextDeadline(); !ok || dl != math.MaxInt64 || p.bn.searched > 10 {
		t.Fatalf("NextDeadline = %d, %v after examining %d opportunities; want the end of time at once", dl, ok, p.bn.searched)
	}
	if pkt := p.Dequeue(math.MaxInt64 - 1); pkt != nil {
		t.Fatal("packet delivered")
	}
	checkInvariant(t, p)
}
