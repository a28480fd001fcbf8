package clitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/peertest"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/workload"
)

// RequireStack marks t unavailable (testsupport.Unavailable: a failure
// under QUICBENCH_REQUIRE_ALL) unless every role of stack name passes its
// registry check (its programs are built and run).
func RequireStack(t *testing.T, name string) {
	t.Helper()
	st, ok := peers.Lookup(name)
	if !ok {
		t.Fatalf("no stack %q in the registry", name)
	}
	for _, role := range st.Roles() {
		if _, _, err := peers.Check(context.Background(), st, role); err != nil {
			testsupport.Unavailable(t, "%v", err)
		}
	}
}

// ServerSendsQuicbenchContent runs stack name's HTTP/3 server on the
// loopback interface under each congestion control of ccs: its hello
// names the stack, a version starting with "name " and the algorithm
// asked for; it sends quicbench's page, objects and /bytes bodies byte for
// byte (peertest.SameContent), reads a connection still open
// (peertest.OpenConnectionStats) and writes its TLS secrets.
func ServerSendsQuicbenchContent(t *testing.T, name string, ccs ...string) {
	t.Helper()
	RequireStack(t, name)
	keys := filepath.Join(t.TempDir(), "keys.log")
	for _, cc := range ccs {
		p, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: name, Host: "127.0.0.1", CongestionControl: cc, KeyLogFile: keys, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		info := p.Info()
		if info.Impl != name || !strings.HasPrefix(info.Version, name+" ") || info.Settings["cc"] != cc || info.Port == 0 {
			p.Close()
			t.Fatalf("hello %+v (asked %s)", info, cc)
		}
		c := peertest.LoopbackClient(t, info, model.ProtoH3)
		peertest.SameContent(t, c, "https://127.0.0.1:"+strconv.Itoa(info.Port), model.ProtoH3)
		peertest.OpenConnectionStats(t, p, info, cc)
		p.Close()
	}
	if b, err := os.ReadFile(keys); err != nil || !strings.Contains(string(b), "CLIENT_TRAFFIC_SECRET_0") {
		t.Fatalf("key log: %v %q", err, b)
	}
}

// ClientFetchesFromQuicbench runs stack name's HTTP/3 client against
// quicbench's own server on the loopback interface: a 2 MB download is
// valid, over h3, with one connection that ran the congestion control cc.
func ClientFetchesFromQuicbench(t *testing.T, name, cc string) {
	t.Helper()
	RequireStack(t, name)
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	info := srv.Info()
	ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{})}
	res := ex.Execute(context.Background(), workload.Request{Test: "download", Protocol: model.ProtoH3, Client: name, CC: cc,
		Params: plan.Params{Size: 2_000_000}, Target: workload.Target{Host: "127.0.0.1", Port: info.Port, CAPEM: info.CAPEM}})
	if res.Status != model.StatusOK {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if res.Metrics["goodput_mbps"] <= 0 || res.Negotiated.ALPN != "h3" || len(res.Transport) != 1 || res.Transport[0].CongestionAlgo != cc {
		t.Fatalf("result %+v", res)
	}
}

// NativeAcrossTestbed runs stack name as the server (download, page,
// upload and ttfb from the built-in client) and as the client (download
// and ttfb from quicbench's server) over a lossy 20 ms link, under Cubic
// and NewReno, two iterations: every sample is valid (HTTP/3 negotiated,
// each of the stack's QUIC connections ran the congestion control asked
// for) and every sample of its server carries its connections' statistics
// (a smoothed RTT of at least the link's 20 ms).
func NativeAcrossTestbed(t *testing.T, name string, seed int) {
	t.Helper()
	RequireStack(t, name)
	r := RunPlan(t, fmt.Sprintf(`
name: %[1]s
seed: %[2]d
iterations: 2
warmup: false
protocols: [h3]
cc: [cubic, reno]
timeout: 30s
scenarios:
  - name: lossy
    link: "delay 10ms loss 1%%"
tests:
  - test: download
    params: {size: 2MB}
    server: %[1]s
  - test: page
    params: {objects: 8, size: 20KB}
    server: %[1]s
  - test: upload
    params: {size: 1MB}
    server: %[1]s
  - test: download
    params: {size: 1MB}
    client: %[1]s
  - test: ttfb
    client: %[1]s
`, name, seed), runner.Options{})
	all := r.Of(func(*model.Cell) bool { return true })
	withStats, open := 0, 0
	var without []string
	for _, s := range all {
		switch {
		case s.Cell.Server != name:
		case hasServerStats(s):
			withStats++
		default:
			without = append(without, fmt.Sprintf("%s (iteration %d, transport %+v)", s.Cell.Key, s.Iteration, s.Transport))
		}
		for _, w := range s.Warnings {
			if strings.Contains(w, "read while still open") {
				open++
			}
		}
		if s.Status != model.StatusOK || s.Negotiated.ALPN != "h3" {
			t.Errorf("%s: %s %s (%+v)", s.Cell.Key, s.Status, s.Error, s.Negotiated)
		}
		for _, tr := range s.Transport {
			if tr.Kind == "quic" && tr.CongestionAlgo != s.Cell.CC && (tr.Side == "server") == (s.Cell.Server == name) {
				t.Errorf("%s: the %s's QUIC ran %s", s.Cell.Key, tr.Side, tr.CongestionAlgo)
			}
		}
	}
	t.Logf("%d of %d samples read the server's statistics from a connection still open (its close lost)", open, len(all))
	if len(all) != 20 {
		t.Errorf("%d samples, want 20 (5 tests, 2 congestion controls, 2 iterations)", len(all))
	}
	if withStats < 12 {
		t.Errorf("%d of %s's server samples carry its statistics over the 20 ms RTT, want all 12; without: %s", withStats, name, strings.Join(without, ", "))
	}
}

// hasServerStats reports whether sample s carries a server-side QUIC
// connection's statistics with a smoothed RTT of at least 20 ms.
func hasServerStats(s Sample) bool {
	for _, tr := range s.Transport {
		if tr.Side == "server" && tr.SmoothedRTTms >= 20 && tr.PacketsSent > 0 {
			return true
		}
	}
	return false
}
