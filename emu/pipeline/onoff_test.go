package pipeline

import (
	"fmt"
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
	p, pool := build(t, "rate 12mbit onoff 100ms 50ms", 1)
	got := drive(t, p, pool, every(120, 0, 0, 1500), true)
	if len(got) != 120 {
		t.Fatalf("delivered %d", len(got))
	}
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
	p, pool = build(t, fmt.Sprintf("trace %s onoff 3ms 2ms", writeTrace(t, "1\n")), 1)
	got = drive(t, p, pool, every(6, 0, 0, 1500), true)
	// Opportunities at 1, 2 (ON), 3, 4 (OFF), 5, 6, 7 (ON), 8, 9 (OFF), 10.
	equalTimes(t, "trace+onoff", deliveryTimes(got), []emu.Time{1 * ms, 2 * ms, 5 * ms, 6 * ms, 7 * ms, 10 * ms})
}
