package competing

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"":                                    "",
		"tcp":                                 "tcp",
		"tcp cc cubic count 2; quic":          "tcp cc cubic count 2; quic",
		" udp  rate 5000kbit ;web":            "udp rate 5mbit; web",
		"web off 1s size 1MB cc bbr; lead 3s": "web size 1MB off 1s cc bbr; lead 3s",
		"quic; lead 2s":                       "quic",
	} {
		s, err := Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		if got := s.String(); got != want {
			t.Errorf("Parse(%q).String() = %q, want %q", in, got, want)
		}
		again, err := Parse(s.String())
		if err != nil || again.String() != want {
			t.Errorf("Parse(%q) does not round-trip: %q, %v", want, again.String(), err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"ftp":                         "unknown flow kind",
		"udp":                         "udp flows need a rate",
		"udp rate fast":               "not a rate",
		"tcp count 0":                 "count must be",
		"tcp cc":                      "cc needs a value",
		"tcp cc Cu$bic":               "not a congestion control",
		"quic cc cubic":               "quic flows take count",
		"tcp;;quic":                   "clause 2 is empty",
		"lead 2s; lead 3s":            "lead takes one duration",
		"lead 2h":                     "lead must be",
		"tcp count 20; quic count 13": "more than 32 flows",
		"web size 0B":                 "size",
	} {
		_, err := Parse(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestJain(t *testing.T) {
	for _, c := range []struct {
		x    []float64
		want float64
	}{{nil, 0}, {[]float64{0, 0}, 0}, {[]float64{5, 5}, 1}, {[]float64{10, 0}, 0.5}, {[]float64{3, 1}, 0.8}, {[]float64{1, 1, 1, 0}, 0.75}} {
		if got := Jain(c.x); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", c.x, got, c.want)
		}
	}
}

func TestSummarizeSteadyPart(t *testing.T) {
	bin := 100 * time.Millisecond
	// 6 bins: the first third (2 bins) is left out.
	a := FlowResult{Label: "a", Bins: []int64{1e6, 1e6, 125000, 125000, 125000, 125000}}
	b := FlowResult{Label: "b", Bins: []int64{0, 0, 125000, 125000, 125000, 125000}}
	s := Summarize([]FlowResult{a, b}, bin)
	if s.SteadyStart != 200*time.Millisecond || s.SteadyEnd != 600*time.Millisecond {
		t.Fatalf("steady part %v..%v, want 200ms..600ms", s.SteadyStart, s.SteadyEnd)
	}
	if s.Jain != 1 || s.Flows[0].GoodputMbs != 10 || s.Flows[1].Share != 0.5 || s.TotalMbps != 20 {
		t.Fatalf("summary %+v", s)
	}
	ser := Series(a, bin, 200*time.Millisecond, 0)
	if len(ser.Points) != 4 || ser.Points[0].T != 0 || ser.Points[0].V != 10 {
		t.Fatalf("series %+v", ser)
	}
}
