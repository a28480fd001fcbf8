package runner

import (
	"testing"
	"time"
)

// A sample's overhead counts everything between the start of storing the
// previous sample and the start of storing it, the measured part excepted:
// the previous sample's storing is included.
func TestOverheadIncludesStoring(t *testing.T) {
	now := time.Unix(1000, 0)
	m := overheadMeter{now: func() time.Time { return now }}
	// first sample: 1 s of set-up, 7 s measured, 2 s of reading results
	m.start()
	now = now.Add(10 * time.Second)
	if got := m.storing(7 * time.Second); got != 3*time.Second {
		t.Fatalf("first sample: overhead %v, want 3s", got)
	}
	// storing it takes 2 s; the second sample: 1 s before and after its
	// 5 s measured part
	now = now.Add(2 * time.Second)
	m.start()
	now = now.Add(7 * time.Second)
	if got := m.storing(5 * time.Second); got != 4*time.Second {
		t.Fatalf("second sample: overhead %v, want 4s (2s storing the first + 2s around the measurement)", got)
	}
}

// A testbed that waits between its blocks (idle, then start) does not
// charge the wait to the next block's first sample, which still carries
// the storing of the block's last sample.
func TestOverheadLeavesOutIdle(t *testing.T) {
	now := time.Unix(1000, 0)
	m := overheadMeter{now: func() time.Time { return now }}
	m.idle() // before any sample: nothing to leave out
	m.start()
	now = now.Add(9 * time.Second)
	if got := m.storing(8 * time.Second); got != time.Second {
		t.Fatalf("first sample: overhead %v, want 1s", got)
	}
	// storing takes 1 s, then the block ends and the testbed waits 47 s
	now = now.Add(time.Second)
	m.idle()
	now = now.Add(47 * time.Second)
	m.start()
	now = now.Add(10 * time.Second)
	if got := m.storing(8 * time.Second); got != 3*time.Second {
		t.Fatalf("after an idle wait: overhead %v, want 3s (1s storing the previous + 2s around the measurement, not the 47s wait)", got)
	}
	// the next sample of the block: no idle, nothing left out
	now = now.Add(time.Second)
	m.start()
	now = now.Add(9 * time.Second)
	if got := m.storing(8 * time.Second); got != 2*time.Second {
		t.Fatalf("next sample: overhead %v, want 2s", got)
	}
}

// The preparation the client reports is stored as it is, but never as more
// than the overhead leaves beside the drain, nor as less than 0.
func TestOverheadPrepPart(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct{ reported, overhead, drain, want time.Duration }{
		{0, 30 * ms, 25 * ms, 0},
		{120 * ms, 150 * ms, 25 * ms, 120 * ms},
		{125 * ms, 150 * ms, 25 * ms, 125 * ms},
		{130 * ms, 150 * ms, 25 * ms, 125 * ms}, // a wrong report: clamped
		{-ms, 150 * ms, 25 * ms, 0},
		{600 * ms, 900 * ms, 0, 600 * ms}, // Chromium: no drain
	} {
		if got := prepPart(c.reported, c.overhead, c.drain); got != c.want {
			t.Errorf("prepPart(%v, %v, %v) = %v, want %v", c.reported, c.overhead, c.drain, got, c.want)
		}
	}
}
