package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
)

// ParseSize parses a byte size as plans write it: model.ParseSize.
func ParseSize(s string) (int64, error) { return model.ParseSize(s) }

// FormatSize writes n bytes in a short exact form that ParseSize reads
// back: model.FormatSize.
func FormatSize(n int64) string { return model.FormatSize(n) }

// parseDuration parses a Go duration ("50ms", "1.5s", "2m"). A bare number is
// rejected (except 0), since its unit would be a guess.
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return 0, fmt.Errorf("duration %q has no unit (write e.g. %sms or %ss)", s, t, t)
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("malformed duration %q (write e.g. 50ms, 1.5s, 2m)", s)
	}
	return d, nil
}

// formatDuration writes d with the largest unit that divides it exactly
// ("50ms", "90s", "250us"), which parseDuration reads back.
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	if d < 0 {
		return "-" + formatDuration(-d)
	}
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}} {
		if d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10) + "ns"
}
