package runner_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/peers/aioquic"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
)

// A plan crossing quicbench's server with aioquic and Caddy: every cell is
// served by the server it names (the negotiated protocol and the peer
// versions say so), a server that cannot serve a protocol or test is
// skipped, and the implementations are compared across servers.
func TestRunAcrossServers(t *testing.T) {
	needRoot(t)
	for _, name := range []string{"aioquic", "caddy"} {
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
server: [quicbench, aioquic, caddy]
cc: cubic
timeout: 20s
scenarios:
  - name: d2
    link: "delay 2ms"
tests:
  - test: download
    params: {size: 300KB}
  - test: page
    params: {objects: 4, size: 8KB}
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
		if c.Server == "aioquic" && c.Protocol != model.ProtoH3 {
			t.Errorf("cell %s: aioquic serves only h3", c.Key)
		}
		if c.Server == "caddy" && c.Test == plan.TestUpload {
			t.Errorf("cell %s: caddy cannot serve uploads", c.Key)
		}
		if c.Server != model.ServerQuicbench && !strings.HasSuffix(c.Key, "/"+c.Server) {
			t.Errorf("cell %s does not name its server %s", c.Key, c.Server)
		}
	}
	// download and page: 2 + 1 + 2 cells; upload: 2 + 1
	want := map[string]int{model.ServerQuicbench: 6, "aioquic": 3, "caddy": 4}
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
		// Caddy cannot choose its sockets' cc: the testbed's routes give
		// it the cell's, as the kernel reports.
		if c.Server == "caddy" && c.Protocol == model.ProtoH2 && !ranCC(s, "server", "cubic") {
			t.Errorf("%s: caddy's TCP did not run cubic: %+v", c.Key, s.Transport)
		}
		if c.Server == "aioquic" && c.Test == plan.TestDownload && !hasServerStats(s) {
			t.Errorf("%s: no server-side transport statistics from aioquic", c.Key)
		}
	}
	if !strings.HasPrefix(ds.Run.Env.Peers["aioquic server"], "aioquic 1.") || !strings.Contains(ds.Run.Env.Peers["caddy server"], "2.") {
		t.Errorf("peer versions %v", ds.Run.Env.Peers)
	}
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
