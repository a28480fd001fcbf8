package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
)

// parallelBrowserPlan has Chromium downloads over a slow link, long and
// link-bound enough for the admission rule to run them beside one another
// (4 groups of one iteration each), and one Chromium cell on an unlimited
// link, which runs alone.
const parallelBrowserPlan = `
name: parallel-browsers
seed: 5
iterations: 1
warmup: false
protocols: [h2]
client: chromium
timeout: 60s
scenarios:
  - {name: a, link: "rate 1mbit delay 10ms"}
  - {name: b, link: "rate 1mbit delay 10ms"}
  - {name: c, link: "rate 1mbit delay 10ms"}
  - {name: d, link: "rate 1mbit delay 10ms"}
  - {name: clean}
tests:
  - test: download
    params: {size: 1MB}
`

// TestParallelBrowsers: browser blocks share the machine on parallel
// testbeds (admitted from their predicted CPU, no longer always alone),
// each sample keeps its validity checks and records its concurrency, and
// the cell on an unlimited link still runs alone.
func TestParallelBrowsers(t *testing.T) {
	needRoot(t)
	needChromium(t)
	p, err := plan.Parse("parallel-browsers.yaml", []byte(parallelBrowserPlan))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	for i := range cells {
		l, err := plan.CellLoad(&cells[i])
		if err != nil {
			t.Fatal(err)
		}
		if !l.Browser || l.Exclusive != (cells[i].Scenario == "clean") {
			t.Fatalf("%s: load %+v; want a browser load, exclusive on the unlimited link only", cells[i].Key, l)
		}
	}
	db := filepath.Join(t.TempDir(), "browsers.db")
	exe, _ := os.Executable()
	var log strings.Builder
	sum, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: &log, Mode: runner.ProgressLines, Parallel: 4})
	if err != nil || !sum.Complete {
		t.Fatalf("run: %v, %+v\n%s", err, sum, log.String())
	}
	ds := load(t, db)
	checkComplete(t, ds)
	byID := map[int64]model.Cell{}
	for _, c := range ds.Cells {
		byID[c.ID] = c
	}
	beside := 0
	for _, s := range ds.Samples {
		c := byID[s.CellID]
		if s.Status != model.StatusOK {
			t.Errorf("%s: %s %s", c.Key, s.Status, s.Error)
		}
		if s.CPU.ClientUser+s.CPU.ClientSys <= 0 {
			t.Errorf("%s: no client CPU recorded for the browser", c.Key)
		}
		switch {
		case c.Scenario == "clean" && s.Concurrency != 1:
			t.Errorf("%s ran beside %d others; on an unlimited link it must run alone", c.Key, s.Concurrency-1)
		case c.Scenario != "clean" && s.Concurrency > 1:
			beside++
		}
	}
	if beside < 2 {
		t.Errorf("%d Chromium samples ran beside others: browser blocks did not share the machine\n%s", beside, log.String())
	}
}
