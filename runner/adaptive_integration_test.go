package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
)

const adaptivePlanText = `name: adaptive
seed: 3
iterations: 6
precision: 10%
max_iterations: 9
protocols: [h2, h3]
timeout: 20s
scenarios:
  - name: clean
  - name: delayed
    link: "delay 20ms"
tests:
  - test: ttfb
`

// An adaptive run stops each group on its rule and stores why; a run cut
// short and resumed ends the same way.
func TestAdaptiveRun(t *testing.T) {
	needRoot(t)
	p, err := plan.Parse("adaptive.yaml", []byte(adaptivePlanText))
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	db := filepath.Join(t.TempDir(), "a.db")
	if _, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, MaxSamples: 10}); err != nil {
		t.Fatal(err)
	}
	sum, err := runner.Run(context.Background(), runner.Options{DB: db, Resume: true, Exe: exe})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Complete {
		t.Fatalf("adaptive run not complete: %+v", sum)
	}
	ds := load(t, db)
	if ds.Run.Status != "complete" {
		t.Fatalf("run status %q", ds.Run.Status)
	}
	if len(ds.Stops) != 2 {
		t.Fatalf("%d group stops stored, want 2: %+v", len(ds.Stops), ds.Stops)
	}
	counted := map[int64]int{}
	for _, s := range ds.Samples {
		if !s.Warmup {
			counted[s.CellID]++
		}
	}
	for _, st := range ds.Stops {
		switch {
		case st.Iterations < 6 || st.Iterations > 9:
			t.Errorf("%s stopped after %d iterations, outside 6..9", st.Group, st.Iterations)
		case st.Reason == model.StopPrecision && !(st.Precision <= 10):
			t.Errorf("%s stopped on precision at ±%v%%, over the 10%% target", st.Group, st.Precision)
		case st.Reason == model.StopMaximum && st.Iterations != 9:
			t.Errorf("%s stopped at the maximum after %d iterations", st.Group, st.Iterations)
		case st.Reason != model.StopPrecision && st.Reason != model.StopMaximum:
			t.Errorf("%s: reason %q", st.Group, st.Reason)
		}
		for _, c := range ds.Cells {
			if c.Group == st.Group && counted[c.ID] != st.Iterations {
				t.Errorf("%s: %d counted samples, the group stopped after %d iterations", c.Key, counted[c.ID], st.Iterations)
			}
		}
		t.Logf("%s: %s after %d iterations (±%.2f%%, %s)", st.Group, st.Reason, st.Iterations, st.Precision, st.WorstPair)
	}
}
