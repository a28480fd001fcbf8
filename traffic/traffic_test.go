package traffic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/competing"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
)

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
		t.Fatalf("testbed: %v", err) // root is there: a testbed that cannot be built is a failure
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

// run runs flows for d and returns what they received.
func run(t *testing.T, tb *netns.Testbed, flows string, d time.Duration) []competing.FlowResult {
	t.Helper()
	s, err := competing.Parse(flows)
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
// competing.FairTolerance), and together they never receive more than the bottleneck
// carries.
func TestTwoIdenticalFlowsShareFairly(t *testing.T) {
	tb := newTestbed(t, "rate 20mbit delay 10ms queue droptail bytes 100KB")
	res := run(t, tb, "quic count 2", 9*time.Second)
	sum := competing.Summarize(res, DefaultBin)
	t.Logf("steady %v..%v: %+v jain %.3f total %.2f Mbit/s", sum.SteadyStart, sum.SteadyEnd, sum.Flows, sum.Jain, sum.TotalMbps)
	if sum.Jain < competing.FairTolerance {
		t.Errorf("Jain's index of two identical QUIC flows = %.3f, want >= %.2f", sum.Jain, competing.FairTolerance)
	}
	if sum.TotalMbps > 20*competing.CapacityMargin {
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
	if total > 20*competing.CapacityMargin {
		t.Errorf("the flows received %.2f Mbit/s through a 20 Mbit/s bottleneck", total)
	}
	if udp := float64(res[1].Bytes) * 8 / d.Seconds() / 1e6; udp < 2 || udp > 4*competing.CapacityMargin {
		t.Errorf("udp rate 4mbit received %.2f Mbit/s", udp)
	}
}

// The testbed's routes give every connection across the link the
// testbed's congestion control; a competing flow that asks for another
// gets it all the same (netns.PortCC), on both of its sockets, and the
// rules that give it are gone once the connection is set up.
func TestFlowsKeepTheirCC(t *testing.T) {
	tb := newTestbed(t, "rate 20mbit delay 5ms") // CC cubic
	res := run(t, tb, "tcp cc bbr; tcp cc reno; tcp", 1500*time.Millisecond)
	if len(res) != 3 {
		t.Fatalf("%d flows", len(res))
	}
	for _, r := range res {
		if r.Bytes == 0 {
			t.Errorf("flow %s moved nothing", r.Label)
		}
	}
	out, err := tb.Command(context.Background(), netns.Server, "ip", "rule", "list").CombinedOutput()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "sport") {
		t.Errorf("rules left after the flows connected:\n%s", out)
	}
}

// A flow's connection that runs another algorithm than it asked for is
// refused, naming both.
func TestCheckCC(t *testing.T) {
	if err := checkCC(""); err != nil {
		t.Fatal(err)
	}
	tb := newTestbed(t, "delay 1ms")
	srv, cli, err := tcpPair(context.Background(), tb, "")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer cli.Close()
	// The testbed's routes carry cubic: asking for bbr afterwards finds cubic.
	err = checkCC("bbr", srv, cli)
	if err == nil || !strings.Contains(err.Error(), "asked for congestion control bbr, its server socket runs cubic") {
		t.Fatalf("checkCC: %v", err)
	}
}
