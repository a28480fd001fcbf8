package runner_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/peers/aioquic"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
)

// A plan crossing quicbench's server with every other server of the
// registry (issue 26's done criterion): h3 from quicbench's, aioquic's,
// ngtcp2's, quiche's and quinn's servers and h2 from quicbench's, Caddy's
// and nginx's, for a download, a page and ttfb. Every cell is served by the
// server it names and every sample is valid: the protocol negotiated, the
// TCP connections' congestion control read from the kernel, and each QUIC
// connection's from its stack (the runner's checks); a server that cannot
// serve a protocol or test is skipped; the peers' versions are stored.
func TestRunAcrossServers(t *testing.T) {
	needRoot(t)
	servers := []string{"quicbench", "aioquic", "caddy", "nginx", "ngtcp2", "quiche", "quinn"}
	for _, name := range servers[1:] {
		st, _ := peers.ServerStack(name)
		if _, _, err := peers.Check(context.Background(), st, peers.RoleServer); err != nil {
			testsupport.Unavailable(t, "%s: %v", name, err)
		}
	}
	p, err := plan.Parse("servers.yaml", []byte(`
name: servers
seed: 3
iterations: 2
warmup: false
protocols: [h2, h3]
server: [`+strings.Join(servers, ", ")+`]
cc: reno
timeout: 20s
scenarios:
  - name: d2
    link: "delay 2ms"
tests:
  - test: download
    params: {size: 300KB}
  - test: page
    params: {objects: 4, size: 8KB}
  - test: ttfb
  - test: upload
    params: {size: 100KB}
`))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "s.db")
	runPlan(t, p, db, 0)
	ds := load(t, db)
	checkComplete(t, ds)
	servedBy := map[string]int{}
	for _, c := range ds.Cells {
		servedBy[c.Server]++
		st, _ := peers.ServerStack(c.Server)
		if !slices.Contains(st.Server.Protocols, c.Protocol) {
			t.Errorf("cell %s: %s serves only %v", c.Key, c.Server, st.Server.Protocols)
		}
		if ok, _, _ := peers.Serves(c.Server, c.Test); !ok {
			t.Errorf("cell %s: %s cannot serve %s", c.Key, c.Server, c.Test)
		}
		if c.Server != model.ServerQuicbench && !strings.HasSuffix(c.Key, "/"+c.Server) {
			t.Errorf("cell %s does not name its server %s", c.Key, c.Server)
		}
	}
	// download, page and ttfb: h2 and h3 from quicbench's and Caddy's,
	// h3 from the four QUIC-only ones, h2 from nginx; upload: not from the
	// servers of files (Caddy, nginx, ngtcp2)
	want := map[string]int{model.ServerQuicbench: 8, "aioquic": 4, "caddy": 6, "nginx": 3, "ngtcp2": 3, "quiche": 4, "quinn": 4}
	for s, n := range want {
		if servedBy[s] != n {
			t.Errorf("%d cells of server %s, want %d (%v)", servedBy[s], s, n, servedBy)
		}
	}
	cells := map[int64]model.Cell{}
	for _, c := range ds.Cells {
		cells[c.ID] = c
	}
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if s.Status != model.StatusOK {
			t.Errorf("%s it %d: %s %s", c.Key, s.Iteration, s.Status, s.Error)
			continue
		}
		alpn := map[string]string{model.ProtoH2: "h2", model.ProtoH3: "h3"}[c.Protocol]
		if s.Negotiated.ALPN != alpn {
			t.Errorf("%s: negotiated %q", c.Key, s.Negotiated.ALPN)
		}
		// Caddy and nginx cannot choose their sockets' cc: the testbed's
		// routes give them the cell's, as the kernel reports.
		if c.Protocol == model.ProtoH2 && !ranCC(s, "server", "reno") {
			t.Errorf("%s: the server's TCP did not run reno: %+v", c.Key, s.Transport)
		}
		if c.Test == plan.TestDownload && c.Protocol == model.ProtoH3 && slices.Contains([]string{"aioquic", "quiche", "quinn", "ngtcp2"}, c.Server) {
			if !hasServerStats(s) {
				t.Errorf("%s: no server-side transport statistics from %s", c.Key, c.Server)
			} else if !ranQUICCC(s, "server", "reno") {
				t.Errorf("%s: %s's QUIC did not report reno: %+v", c.Key, c.Server, s.Transport)
			}
		}
	}
	for _, name := range servers[1:] {
		if ds.Run.Env.Peers[name+" server"] == "" {
			t.Errorf("no version of the %s server stored: %v", name, ds.Run.Env.Peers)
		}
	}
}

func ranQUICCC(s model.Sample, side, cc string) bool {
	for _, x := range s.Transport {
		if x.Side == side && x.Kind == "quic" && x.CongestionAlgo == cc {
			return true
		}
	}
	return false
}

func ranCC(s model.Sample, side, cc string) bool {
	for _, x := range s.Transport {
		if x.Side == side && x.Kind == "tcp" && x.CongestionAlgo == cc {
			return true
		}
	}
	return false
}

func hasServerStats(s model.Sample) bool {
	for _, x := range s.Transport {
		if x.Side == "server" && x.SmoothedRTTms > 0 {
			return true
		}
	}
	return false
}

// A plan that needs a peer this machine lacks stops before any testbed is
// built, saying which peer and where to look.
func TestMissingPeerStopsAtOnce(t *testing.T) {
	t.Setenv(aioquic.EnvVar, filepath.Join(t.TempDir(), "no-python"))
	p, err := plan.Parse("p.yaml", []byte("name: p\nserver: aioquic\nprotocols: [h3]\nscenarios:\n  - name: s\ntests:\n  - test: ttfb\n"))
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	_, err = runner.Run(context.Background(), runner.Options{Plan: p, DB: filepath.Join(t.TempDir(), "p.db"), Exe: exe, Progress: io.Discard, Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "the plan's cells need the aioquic server") || !strings.Contains(err.Error(), "quicbench doctor") {
		t.Fatalf("error %v, want one naming aioquic and doctor", err)
	}
}
