package ngtcp2_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/cli"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"

	_ "modernc.org/sqlite"
)

// The test binary doubles as the quicbench executable: the runner starts it
// as `serve` and `agent` inside the namespaces.
const execEnv = "QUICBENCH_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(cli.Main(&cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:], Getenv: os.Getenv, Exe: os.Args[0]}))
	}
	os.Setenv(execEnv, "1") // for the children
	os.Exit(m.Run())
}

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
	p, err := plan.Parse("ngtcp2.yaml", []byte(`
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
`))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "run.db")
	exe, _ := os.Executable()
	var log strings.Builder
	if _, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: &log, Mode: runner.ProgressLines}); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	s, err := store.OpenExisting(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.LatestRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.LoadDataset(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v := run.Env.Peers["ngtcp2 server"]; !strings.HasPrefix(v, "ngtcp2 0.12") {
		t.Errorf("server version recorded: %q (%v)", v, run.Env.Peers)
	}
	seen := map[string]int{}
	reductions := map[string]int64{}
	for _, smp := range ds.Samples {
		i := slices.IndexFunc(ds.Cells, func(c model.Cell) bool { return c.ID == smp.CellID })
		c := ds.Cells[i]
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
