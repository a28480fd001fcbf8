package plan

import (
	"testing"
	"time"
)

func TestDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{"50ms": 50 * time.Millisecond, "1.5s": 1500 * time.Millisecond, "2m": 2 * time.Minute, "0": 0} {
		got, err := parseDuration(in)
		if err != nil || got != want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"50":  `duration "50" has no unit (write e.g. 50ms or 50s)`,
		"5x":  `malformed duration "5x" (write e.g. 50ms, 1.5s, 2m)`,
		"abc": `malformed duration "abc" (write e.g. 50ms, 1.5s, 2m)`,
	} {
		if _, err := parseDuration(in); err == nil || err.Error() != want {
			t.Errorf("parseDuration(%q) error = %v; want %q", in, err, want)
		}
	}
	for d, want := range map[time.Duration]string{0: "0s", 50 * time.Millisecond: "50ms", 90 * time.Second: "90s",
		2 * time.Minute: "2m", time.Hour: "1h", 1500 * time.Millisecond: "1500ms", 250 * time.Microsecond: "250us", 7: "7ns"} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%v) = %q; want %q", d, got, want)
		}
		if back, err := parseDuration(want); err != nil || back != d {
			t.Errorf("parseDuration(formatDuration(%v)) = %v, %v", d, back, err)
		}
	}
}
