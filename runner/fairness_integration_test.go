package runner_test

import (
	"path/filepath"
	"testing"

	"github.com/quicbench/quicbench/competing"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// TestFairnessQuickPlan runs the quick variant of the built-in plan
// fairness (the CI's run of it) and checks its physics: two identical QUIC
// flows share the bottleneck (Jain's index over the steady part at least
// competing.FairTolerance), no sample's flows receive more than the 10 Mbit/s
// bottleneck carries (plus competing.CapacityMargin), every sample with
// competing traffic records it and the machine's CPU, and latency over a
// drop-tail queue of 2 BDP grows once a competing download fills it.
func TestFairnessQuickPlan(t *testing.T) {
	needRoot(t)
	full, err := plan.Builtin("fairness")
	if err != nil {
		t.Fatal(err)
	}
	p, err := full.Quick()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "fairness.db")
	sum := runPlan(t, p, db, 0)
	ds := load(t, db)
	checkComplete(t, ds)
	if sum.Failed+sum.Invalid > 0 {
		t.Errorf("%d failed and %d invalid samples", sum.Failed, sum.Invalid)
	}
	cells := map[int64]*model.Cell{}
	for i := range ds.Cells {
		cells[ds.Cells[i].ID] = &ds.Cells[i]
	}
	lat := map[string][]float64{}
	fair := 0
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if s.Status != model.StatusOK {
			t.Errorf("%s it %d: %s %s", c.Key, s.Iteration, s.Status, s.Error)
			continue
		}
		m := s.Metrics
		if _, competing := c.Factor(plan.FactorCompeting); competing {
			if m["competing_goodput_mbps"] <= 0 {
				t.Errorf("%s it %d: competing_goodput_mbps %v", c.Key, s.Iteration, m["competing_goodput_mbps"])
			}
			if _, ok := m["machine_cpu_busy"]; !ok {
				t.Errorf("%s it %d: machine_cpu_busy not recorded", c.Key, s.Iteration)
			}
		}
		switch c.Test {
		case plan.TestFairness:
			fair++
			t.Logf("%s it %d: jain %.3f share %.3f measured %.2f + competing %.2f Mbit/s", c.Key, s.Iteration,
				m["jain_index"], m["share"], m["goodput_mbps"], m["competing_goodput_mbps"])
			if total := m["goodput_mbps"] + m["competing_goodput_mbps"]; total > 10*competing.CapacityMargin || total <= 0 {
				t.Errorf("%s it %d: the flows received %.2f Mbit/s through a 10 Mbit/s bottleneck", c.Key, s.Iteration, total)
			}
			if c.Protocol == model.ProtoH3 && m["jain_index"] < competing.FairTolerance {
				t.Errorf("%s it %d: h3 vs h3 Jain's index %.3f, want >= %.2f", c.Key, s.Iteration, m["jain_index"], competing.FairTolerance)
			}
			n := 0
			for _, ser := range s.Timelines {
				if ser.Kind == competing.SeriesThroughput {
					n++
				}
			}
			if n != 2 {
				t.Errorf("%s it %d: %d throughput timelines, want 2", c.Key, s.Iteration, n)
			}
		case plan.TestLatency:
			lat[c.Scenario] = append(lat[c.Scenario], m["latency_ms"])
			if c.Scenario == "load-dt" && m["competing_goodput_mbps"] > 10*competing.CapacityMargin {
				t.Errorf("%s it %d: competing flow received %.2f Mbit/s through a 10 Mbit/s bottleneck", c.Key, s.Iteration, m["competing_goodput_mbps"])
			}
		}
	}
	if fair != 8 {
		t.Errorf("%d fairness samples, want 8", fair)
	}
	mean := func(v []float64) float64 {
		var s float64
		for _, x := range v {
			s += x
		}
		return s / float64(len(v))
	}
	if idle, loaded := mean(lat["idle-dt"]), mean(lat["load-dt"]); !(loaded > idle) {
		t.Errorf("latency over drop-tail: idle %.1f ms, under load %.1f ms; a filled queue must add delay", idle, loaded)
	}
}
