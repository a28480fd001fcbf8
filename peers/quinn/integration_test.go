package quinn_test

import (
	"testing"

	"github.com/quicbench/quicbench/cli/clitest"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/runner"

	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) { clitest.Main(m) }

// TestRunAcrossTestbed runs quinn as the server (download, page, upload,
// ttfb from the built-in client) and as the client (download, upload,
// ttfb from quicbench's server) over a lossy link, under Cubic and
// NewReno: every sample is valid (HTTP/3 negotiated, each QUIC
// connection's congestion control the one asked for) and quinn's server
// reports its connections' statistics.
func TestRunAcrossTestbed(t *testing.T) {
	requireQuinn(t)
	r := clitest.RunPlan(t, `
name: quinn
seed: 7
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
    server: quinn
  - test: page
    params: {objects: 8, size: 20KB}
    server: quinn
  - test: upload
    params: {size: 1MB}
    server: quinn
  - test: download
    params: {size: 1MB}
    client: quinn
  - test: ttfb
    client: quinn
`, runner.Options{})
	stats := 0
	for _, s := range r.Of(func(*model.Cell) bool { return true }) {
		if s.Status != model.StatusOK || s.Negotiated.ALPN != "h3" {
			t.Errorf("%s: %s %s (%+v)", s.Cell.Key, s.Status, s.Error, s.Negotiated)
		}
		for _, tr := range s.Transport {
			if tr.Kind == "quic" && tr.CongestionAlgo != s.Cell.CC && (tr.Side == "server") == (s.Cell.Server == "quinn") {
				t.Errorf("%s: the %s's QUIC ran %s", s.Cell.Key, tr.Side, tr.CongestionAlgo)
			}
			if tr.Side == "server" && s.Cell.Server == "quinn" && tr.SmoothedRTTms >= 20 && tr.PacketsSent > 0 {
				stats++
			}
		}
	}
	if n := len(r.Of(func(*model.Cell) bool { return true })); n != 20 {
		t.Errorf("%d samples, want 20 (5 tests, 2 congestion controls, 2 iterations)", n)
	}
	if stats < 12 {
		t.Errorf("%d of quinn's server samples carry its statistics over the 20 ms RTT, want all 12", stats)
	}
}
