package runner_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/safefs"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

// contractPlan declares two contract stacks of the test data: ngc (ngtcp2's
// example programs behind a run_endpoint.sh of ours) as server and client,
// and nope, which supports no test case.
const contractPlan = `
name: contract
seed: 11
iterations: 6
warmup: false
protocols: [h3]
cc: cubic
timeout: 60s
stacks:
  - name: ngc
    command: testdata/contract/run_endpoint.sh
    roles: [server, client]
  - name: nope
    command: testdata/contract/unsupported.sh
    roles: [client]
scenarios:
  - name: r20
    link: "rate 20mbit delay 10ms"
tests:
  - test: download
    params: {size: 3MB}
    client: [builtin, ngc, nope]
  - test: ttfb
    client: ngc
  - test: page
    params: {objects: 6, size: 10KB}
    client: ngc
  - test: download
    params: {size: 1MB}
    server: ngc
`

// TestContractStack runs stacks declared in a plan with the interop
// runner's endpoint contract, with no Go code of theirs: the run is refused
// until the user allows commands; then the contract client's downloads are
// checked byte for byte and timed on the wire, and their goodput agrees
// within 10% with the built-in client's over the same 20 Mbit/s link; the
// contract server serves the built-in client; a stack that exits 127 has
// its cells skipped with a note.
func TestContractStack(t *testing.T) {
	needRoot(t)
	for _, prog := range []string{"gtlsserver", "gtlsclient"} {
		if _, err := os.Stat("/usr/sbin/" + prog); err != nil {
			if _, err := os.Stat("/usr/bin/" + prog); err != nil {
				testsupport.Unavailable(t, "%s (Debian's ngtcp2-server and ngtcp2-client) is not installed", prog)
			}
		}
	}
	// A contract command's root (bind mounts of the host's top-level
	// directories) must never show in this, the host's, mount namespace:
	// removing its directory would delete the host's files through them.
	stop := watchHostMounts(t, os.TempDir())
	defer stop()
	p, err := plan.Parse("contract.yaml", []byte(contractPlan))
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	db := filepath.Join(t.TempDir(), "c.db")
	_, err = runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: io.Discard, Log: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "--allow-commands") || !strings.Contains(err.Error(), "run_endpoint.sh (server, client)") {
		t.Fatalf("a plan with commands ran without --allow-commands: %v", err)
	}
	if _, err := os.Stat(db); err == nil {
		t.Fatal("the refused run created its database")
	}
	var log strings.Builder
	if _, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: &log, Mode: runner.ProgressLines, AllowCommands: true}); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	ds := load(t, db)
	cells := map[int64]model.Cell{}
	for _, c := range ds.Cells {
		cells[c.ID] = c
	}
	goodput := map[string][]float64{}
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if c.Client == "nope" {
			t.Errorf("%s: a sample of a stack that supports nothing", c.Key)
			continue
		}
		if s.Status != model.StatusOK {
			t.Errorf("%s it %d: %s %s", c.Key, s.Iteration, s.Status, s.Error)
			continue
		}
		if c.Client == "ngc" {
			if s.Metrics["wire_timed"] != 1 || s.Metrics["requests"] < 1 {
				t.Errorf("%s: not timed on the wire: %v", c.Key, s.Metrics)
			}
		}
		if c.Test == plan.TestDownload && c.Server != "ngc" {
			goodput[c.Client] = append(goodput[c.Client], s.Value)
		}
	}
	st, err := store.OpenExisting(db)
	if err != nil {
		t.Fatal(err)
	}
	warns, err := st.RunWarnings(context.Background(), ds.Run.ID)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(warns, func(w string) bool {
		return strings.Contains(w, "/nope/") && strings.Contains(w, "nope does not support testcase http3 as client (its command exits 127)")
	}) {
		t.Errorf("no note of the skipped cell in %q", warns)
	}
	b, n := stats.Median(goodput["builtin"]), stats.Median(goodput["ngc"])
	t.Logf("download 3MB over 20 Mbit/s: built-in %.2f Mbit/s, contract client (wire) %.2f Mbit/s, ratio %.3f", b, n, n/b)
	if len(goodput["builtin"]) != 6 || len(goodput["ngc"]) != 6 || n/b < 0.9 || n/b > 1.1 {
		t.Errorf("goodput of the contract client %.2f against the built-in client's %.2f (%d and %d samples): want within 10%%",
			n, b, len(goodput["ngc"]), len(goodput["builtin"]))
	}
}

// watchHostMounts fails t if, until stop is called, a mount point below
// dir appears in this process's mount namespace (sampled every 50 ms, and
// once more at the end).
func watchHostMounts(t *testing.T, dir string) (stop func()) {
	t.Helper()
	before, err := safefs.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	check := func() bool {
		now, err := safefs.MountsUnder(dir)
		if err != nil {
			t.Error(err)
			return false
		}
		for _, m := range now {
			if !slices.Contains(before, m) {
				t.Errorf("a mount appeared in the host's mount namespace: %s", m)
				return false
			}
		}
		return true
	}
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if !check() {
					return
				}
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		check()
	}
}
