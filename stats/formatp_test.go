package stats

import (
	"math"
	"testing"
)

func TestFormatP(t *testing.T) {
	for _, c := range []struct {
		p    float64
		want string
	}{
		{math.NaN(), "–"}, {0.00001, "<0.0001"}, {0.00042, "0.0004"}, {0.0312, "0.031"}, {0.5, "0.500"},
	} {
		if got := FormatP(c.p); got != c.want {
			t.Errorf("FormatP(%v) = %q, want %q", c.p, got, c.want)
		}
	}
}
