package runner_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/parcheck"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/store"
)

// captureCheckPlan is link-bound: downloads at 10 and 50 Mbit/s and TTFB
// at 10 Mbit/s, over h1, h2 and h3.
const captureCheckPlan = `
name: capture-check
seed: 11
iterations: 12
warmup: true
protocols: [h1, h2, h3]
timeout: 60s
scenarios:
  - name: 10mbit
    link: "rate 10mbit delay 20ms"
  - name: 50mbit
    link: "rate 50mbit delay 10ms"
tests:
  - test: download
    params: {size: 2MB}
  - test: ttfb
    scenarios: [10mbit]
`

// BenchmarkCaptureSameAnswer shows whether capture: pcap changes what a
// run measures, as check-parallel does for parallel testbeds: the same
// link-bound plan runs without a capture and with one (headers), the same
// seed pairs their samples iteration by iteration, and parcheck compares
// every cell (median shift, Hodges-Lehmann interval of the paired
// difference, Holm-adjusted signed-rank test; verdict "same" within 3%
// and p >= 0.05). The two runs go at the same time, each on its own
// testbed, so that a machine whose load drifts (a shared one) weighs on
// both alike. With QUICBENCH_CAPTURE_SNAP=whole the capture keeps whole
// packets. One iteration is the pair of runs: -benchtime 1x, with -v for
// the whole table (go test cuts a benchmark's log otherwise).
func BenchmarkCaptureSameAnswer(b *testing.B) {
	testsupport.RequireRoot(b, "needs root")
	snap := plan.SnapHeaders
	if os.Getenv("QUICBENCH_CAPTURE_SNAP") == "whole" {
		snap = plan.SnapWhole
	}
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		exe, _ := os.Executable()
		planFile := filepath.Join(dir, "capture-check.yaml")
		if err := os.WriteFile(planFile, []byte(captureCheckPlan), 0o644); err != nil {
			b.Fatal(err)
		}
		// Each run in a process of its own (quicbench run), both at once.
		var dbs [2]string
		var errs [2]error
		var outs [2][]byte
		var wg sync.WaitGroup
		for k, extra := range [][]string{nil, {"--capture", "--capture-snap", strconv.Itoa(snap)}} {
			dbs[k] = filepath.Join(dir, []string{"off.db", "on.db"}[k])
			args := append([]string{"run", "--plan", planFile, "-o", dbs[k], "--no-report", "-q"}, extra...)
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[k], errs[k] = exec.Command(exe, args...).CombinedOutput()
			}()
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				b.Fatalf("run %s: %v\n%s", dbs[k], err, outs[k])
			}
		}
		off, on := loadB(b, dbs[0]), loadB(b, dbs[1])
		res, err := parcheck.Compare(off, on, parcheck.Config{})
		if err != nil {
			b.Fatal(err)
		}
		var out strings.Builder
		res.WriteText(&out)
		b.Logf("capture off (SERIAL column) vs on (PARALLEL column), snap %d:\n%s", snap, out.String())
		b.ReportMetric(float64(res.Same), "cells-same")
		b.ReportMetric(float64(res.Moved), "cells-moved")
	}
}

// loadB loads the latest run of db.
func loadB(b *testing.B, db string) *model.Dataset {
	b.Helper()
	s, err := store.OpenReadOnly(db)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	run, err := s.LatestRun(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	ds, err := s.LoadDataset(context.Background(), run.ID)
	if err != nil {
		b.Fatal(err)
	}
	return ds
}
