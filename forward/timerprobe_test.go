package forward

import (
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
)

func TestTimerStatsAdd(t *testing.T) {
	var s TimerStats
	for _, late := range []uint64{0, 50_000, 50_001, 150_000, 150_001, 500_000, 500_001, 2_000_000} {
		s.add(late)
	}
	want := TimerStats{Wakeups: 8, LateSumNs: 3_400_003, LateMaxNs: 2_000_000, Over50us: 6, Over150us: 4, Over500us: 2, LateOver150SumNs: 3_150_002}
	if s != want {
		t.Fatalf("got %#v, want %#v", s, want)
	}
	if got := s.LateMean(); got != 425_000*time.Nanosecond {
		t.Errorf("LateMean = %v, want 425µs (integer mean)", got)
	}
	if (TimerStats{}).LateMean() != 0 {
		t.Error("LateMean of no wake-ups is not 0")
	}
}

func TestTimerProbeRejectsBadPeriod(t *testing.T) {
	for _, p := range []time.Duration{0, 9 * time.Microsecond, 11 * time.Millisecond} {
		if tp, err := StartTimerProbe(emu.MonotonicClock(), p, false); err == nil {
			tp.Stop()
			t.Errorf("period %v accepted", p)
		}
	}
}

// TestTimerProbeCounts runs a real probe: every wake-up it counts ended a
// sleep of at least one period, Take starts a new count, and Stop ends the
// thread (twice is harmless).
func TestTimerProbeCounts(t *testing.T) {
	const period = time.Millisecond
	clock := emu.MonotonicClock()
	t0 := clock.Now()
	tp, err := StartTimerProbe(clock, period, true)
	if err != nil {
		t.Fatal(err)
	}
	var first TimerStats
	deadline := time.Now().Add(10 * time.Second)
	for first.Wakeups < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		s := tp.Take()
		first.Wakeups += s.Wakeups
		first.LateMaxNs = max(first.LateMaxNs, s.LateMaxNs)
	}
	if first.Wakeups < 5 {
		t.Fatalf("%d wake-ups in 10 s", first.Wakeups)
	}
	last := tp.Stop()
	elapsed := time.Duration(clock.Now() - t0)
	if n := first.Wakeups + last.Wakeups; n > uint64(elapsed/period)+1 {
		t.Errorf("%d wake-ups in %v: some sleeps were shorter than the %v period", n, elapsed, period)
	}
	if again := tp.Stop(); again.Wakeups != 0 {
		t.Errorf("second Stop returned %d wake-ups, want 0", again.Wakeups)
	}
	if procs.threads != 0 {
		t.Errorf("%d reserved Ps left after Stop", procs.threads)
	}
}
