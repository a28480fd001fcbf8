package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/parcheck"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"
)

// captureCheckPlan is link-bound: 10 and 100 Mbit/s, downloads and TTFB
// over h1, h2 and h3.
const captureCheckPlan = `
name: capture-check
seed: 11
iterations: 10
warmup: true
protocols: [h1, h2, h3]
timeout: 60s
scenarios:
  - name: 10mbit
    link: "rate 10mbit delay 20ms"
  - name: 100mbit-loss
    link: "rate 100mbit delay 10ms loss 1%"
tests:
  - test: download
    params: {size: 2MB}
  - test: ttfb
`

// BenchmarkCaptureSameAnswer shows whether capture: pcap changes what a
// run measures, as check-parallel does for parallel testbeds: the same
// link-bound plan runs without a capture and with one (headers), the same
// seed pairs their samples iteration by iteration, and parcheck compares
// every cell (median shift, Hodges-Lehmann interval of the paired
// difference, Holm-adjusted signed-rank test; verdict "same" within 3%
// and p >= 0.05). With QUICBENCH_CAPTURE_SNAP=whole the capture keeps
// whole packets. One iteration is the pair of runs: -benchtime 1x.
func BenchmarkCaptureSameAnswer(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	snap := plan.SnapHeaders
	if os.Getenv("QUICBENCH_CAPTURE_SNAP") == "whole" {
		snap = plan.SnapWhole
	}
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		exe, _ := os.Executable()
		var dbs [2]string
		for k, capt := range []plan.CaptureSpec{{}, {Kinds: []string{plan.CapturePcap}, Snap: snap}} {
			p, err := plan.Parse("capture-check.yaml", []byte(captureCheckPlan))
			if err != nil {
				b.Fatal(err)
			}
			dbs[k] = filepath.Join(dir, []string{"off.db", "on.db"}[k])
			var log strings.Builder
			if _, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: dbs[k], Exe: exe, Progress: &log, Mode: runner.ProgressQuiet, Capture: capt}); err != nil {
				b.Fatalf("run: %v\n%s", err, log.String())
			}
		}
		off, on := loadB(b, dbs[0]), loadB(b, dbs[1])
		res, err := parcheck.Compare(off, on, parcheck.Config{})
		if err != nil {
			b.Fatal(err)
		}
		var out strings.Builder
		res.WriteText(&out)
		b.Logf("capture off (first) vs on (second), snap %d:\n%s", snap, out.String())
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
