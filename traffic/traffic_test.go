package traffic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
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

// newTestbed builds a testbed whose downlink is link (the uplink only
// delays).
func newTestbed(t *testing.T, link string) *netns.Testbed {
	t.Helper()
	testsupport.RequireRoot(t, "competing traffic runs in network namespaces")
	down, err := spec.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	up, err := spec.Parse("delay 10ms")
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	tb, err := netns.New(context.Background(), netns.Config{Name: "qbtr" + hex.EncodeToString(id), Up: up, Down: down, Seed: 1, CC: "cubic"})
	if err != nil {
		testsupport.Unavailable(t, "testbed: %v", err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

// run runs flows for d and returns what they received.
func run(t *testing.T, tb *netns.Testbed, flows string, d time.Duration) []FlowResult {
	t.Helper()
	s, err := Parse(flows)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := Start(context.Background(), tb, s.Flows, Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	res := ss.Stop()
	for _, r := range res {
		if r.Err != "" {
			t.Errorf("flow %s: %s", r.Label, r.Err)
		}
	}
	return res
}

// The physics checks: two identical QUIC flows through a 20 Mbit/s
// bottleneck share it (Jain's index over the steady part at least
// FairTolerance), and together they never receive more than the bottleneck
// carries.
func TestTwoIdenticalFlowsShareFairly(t *testing.T) {
	tb := newTestbed(t, "rate 20mbit delay 10ms queue droptail bytes 100KB")
	res := run(t, tb, "quic count 2", 9*time.Second)
	sum := Summarize(res, DefaultBin)
	t.Logf("steady %v..%v: %+v jain %.3f total %.2f Mbit/s", sum.SteadyStart, sum.SteadyEnd, sum.Flows, sum.Jain, sum.TotalMbps)
	if sum.Jain < FairTolerance {
		t.Errorf("Jain's index of two identical QUIC flows = %.3f, want >= %.2f", sum.Jain, FairTolerance)
	}
	if sum.TotalMbps > 20*CapacityMargin {
		t.Errorf("the flows received %.2f Mbit/s through a 20 Mbit/s bottleneck", sum.TotalMbps)
	}
	if sum.TotalMbps < 20*0.8 {
		t.Errorf("the flows received only %.2f Mbit/s of a 20 Mbit/s bottleneck", sum.TotalMbps)
	}
}

// Every kind of flow runs between the namespaces; a TCP flow and a
// constant-rate UDP flow together stay within the bottleneck, and the UDP
// flow keeps about its rate.
func TestKindsWithinBottleneck(t *testing.T) {
	tb := newTestbed(t, "rate 20mbit delay 10ms queue codel")
	d := 4 * time.Second
	res := run(t, tb, "tcp cc cubic; udp rate 4mbit; web size 100KB off 200ms", d)
	if len(res) != 3 {
		t.Fatalf("%d flows", len(res))
	}
	var total float64
	for _, r := range res {
		mbps := float64(r.Bytes) * 8 / d.Seconds() / 1e6
		total += mbps
		t.Logf("%s: %.2f Mbit/s", r.Label, mbps)
		if r.Bytes == 0 {
			t.Errorf("flow %s received nothing", r.Label)
		}
	}
	if total > 20*CapacityMargin {
		t.Errorf("the flows received %.2f Mbit/s through a 20 Mbit/s bottleneck", total)
	}
	if udp := float64(res[1].Bytes) * 8 / d.Seconds() / 1e6; udp < 2 || udp > 4*CapacityMargin {
		t.Errorf("udp rate 4mbit received %.2f Mbit/s", udp)
	}
}
