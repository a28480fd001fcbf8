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
