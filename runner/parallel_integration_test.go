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
	"github.com/quicbench/quicbench/store"
)

// parallelPlan has link-bound cells, which share the machine, and one
// cell on an unlimited link, which the admission rule runs alone.
const parallelPlan = `
name: parallel
seed: 11
iterations: 3
warmup: true
protocols: [h1, h2, h3]
timeout: 30s
scenarios:
  - name: clean
  - grid:
      rate: [2mbit, 10mbit]
      delay: [5ms]
    direction: both
tests:
  - test: ttfb
  - test: page
    params: {objects: 5, size: 4KB}
`

// TestParallelRun runs a plan on 4 testbeds, interrupted after 10
// samples, and resumes it on 2: every iteration of a group is taken on one
// testbed with one seed, the link-bound cells ran beside others, the cell
// on an unlimited link ran alone, and the stored parallelism is the
// largest the invocations used.
func TestParallelRun(t *testing.T) {
	needRoot(t)
	t.Parallel()
	p, err := plan.Parse("parallel.yaml", []byte(parallelPlan))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "parallel.db")
	exe, _ := os.Executable()
	var log strings.Builder
	sum, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: &log, Mode: runner.ProgressLines, MaxSamples: 10, Parallel: 4})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	if sum.Complete || sum.Taken != 10 {
		t.Fatalf("partial run: %+v", sum)
	}
	sum, err = runner.Run(context.Background(), runner.Options{DB: db, Resume: true, Exe: exe, Progress: &log, Mode: runner.ProgressLines, Parallel: 2})
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, log.String())
	}
	if !sum.Complete || sum.Resumed != 10 {
		t.Fatalf("resumed run: %+v", sum)
	}
	if !strings.Contains(log.String(), "active]") {
		t.Errorf("the progress lines do not show the active testbeds:\n%s", log.String())
	}
	ds := load(t, db)
	checkComplete(t, ds)

	cells := map[int64]model.Cell{}
	for _, c := range ds.Cells {
		cells[c.ID] = c
	}
	type blockKey struct {
		group string
		it    int
	}
	slotOf, seedOf := map[blockKey]int{}, map[blockKey]uint64{}
	slots := map[int]bool{}
	var beside, exclusive int
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if s.Status != model.StatusOK {
			t.Errorf("sample %s #%d: %s %s", c.Key, s.Iteration, s.Status, s.Error)
		}
		k := blockKey{c.Group, s.Iteration}
		if prev, ok := slotOf[k]; ok && prev != s.Slot {
			t.Errorf("%s iteration %d: protocols taken on testbeds %d and %d", c.Group, s.Iteration, prev, s.Slot)
		}
		if prev, ok := seedOf[k]; ok && prev != s.Seed {
			t.Errorf("%s iteration %d: protocols met different seeds", c.Group, s.Iteration)
		}
		slotOf[k], seedOf[k] = s.Slot, s.Seed
		if s.Slot < 0 || s.Slot >= 4 || s.Concurrency < 1 || s.Concurrency > 4 {
			t.Errorf("sample %s #%d: testbed %d, concurrency %d; want 0..3 and 1..4", c.Key, s.Iteration, s.Slot, s.Concurrency)
		}
		slots[s.Slot] = true
		if c.Scenario == "clean" {
			exclusive++
			if s.Concurrency != 1 {
				t.Errorf("sample %s #%d on an unlimited link ran beside %d others; it must run alone", c.Key, s.Iteration, s.Concurrency-1)
			}
		} else if s.Concurrency > 1 {
			beside++
		}
	}
	if len(slots) < 2 || beside == 0 || exclusive == 0 {
		t.Errorf("testbeds used %v, %d link-bound samples beside others, %d exclusive samples: the run did not run in parallel", slots, beside, exclusive)
	}
	st, err := store.OpenExisting(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.RunParallel(context.Background(), ds.Run.ID); err != nil || n != 4 {
		t.Errorf("stored parallelism %d, %v; want 4 (the largest of the invocations)", n, err)
	}
}
