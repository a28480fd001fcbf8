package ngtcp2_test

import (
	"context"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/cli/clitest"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/runner"

	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// TestRunAcrossTestbed runs ngtcp2 as the server (a download and a page
// from the built-in client) and as the client (a download and ttfb from
// quicbench's server) over a lossy link, under Cubic and NewReno: every
// sample is valid (HTTP/3 negotiated, the congestion control checked) and
// the server's statistics, read from its qlog, show the algorithm asked
// for in its window's reductions.
func TestRunAcrossTestbed(t *testing.T) {
	testsupport.RequireRoot(t, "needs root for network namespaces")
	st, _ := peers.Lookup("ngtcp2")
	for _, role := range st.Roles() {
		if _, _, err := peers.Check(context.Background(), st, role); err != nil {
			testsupport.Unavailable(t, "%v", err)
		}
	}
	r := clitest.RunPlan(t, `
name: ngtcp2
seed: 5
iterations: 2
warmup: false
protocols: [h3]
cc: [cubic, reno]
timeout: 30s
scenarios:
  - name: lossy
    link: "delay 10ms loss 1%"
tests:
  - test: download
    params: {size: 2MB}
    server: ngtcp2
  - test: page
    params: {objects: 8, size: 20KB}
    server: ngtcp2
  - test: download
    params: {size: 1MB}
    client: ngtcp2
  - test: ttfb
    client: ngtcp2
`, runner.Options{})
	if v := r.Run.Env.Peers["ngtcp2 server"]; !strings.HasPrefix(v, "ngtcp2 0.12") {
		t.Errorf("server version recorded: %q (%v)", v, r.Run.Env.Peers)
	}
	seen := map[string]int{}
	reductions := map[string]int64{}
	for _, smp := range r.Samples {
		c := smp.Cell
		if smp.Status != model.StatusOK {
			t.Errorf("%s: %s %s", c.Key, smp.Status, smp.Error)
			continue
		}
		if smp.Negotiated.ALPN != "h3" {
			t.Errorf("%s: negotiated %+v", c.Key, smp.Negotiated)
		}
		who := c.Server
		if c.Client == "ngtcp2" {
			who = "client"
		}
		seen[c.Test+"/"+who]++
		for _, tr := range smp.Transport {
			if tr.Kind == "quic" && tr.Side == "server" && c.Server == "ngtcp2" {
				if tr.CongestionAlgo != c.CC {
					t.Errorf("%s: the server ran %s", c.Key, tr.CongestionAlgo)
				}
				reductions[c.CC] += tr.CongestionEvents
			}
		}
	}
	for _, k := range []string{"download/ngtcp2", "page/ngtcp2", "download/client", "ttfb/client"} {
		if seen[k] != 4 {
			t.Errorf("%s: %d valid samples, want 4 (2 iterations, 2 congestion controls)", k, seen[k])
		}
	}
	for _, cc := range []string{"cubic", "reno"} {
		if reductions[cc] == 0 {
			t.Errorf("%s: no window reduction seen in the server's qlogs: the algorithm was not checked", cc)
		}
	}
	t.Logf("window reductions checked: %v", reductions)
}
