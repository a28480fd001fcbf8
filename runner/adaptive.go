package runner

import (
	"context"
	"math"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/stats"
)

// adaptive runs the stopping rule of a plan with a precision target: each
// cell group keeps iterating, in its seeded, paired order, until every
// protocol pair's 95% interval of the paired median difference is narrower
// than the target (stats.GroupPrecision), after at least the design's
// iterations and at most the plan's max_iterations. It stops on precision,
// never on a p-value, so the verdicts keep their error rates.
type adaptive struct {
	target float64
	groups map[string]*groupState
}

// groupState is one cell group of an adaptive run.
type groupState struct {
	key   string
	cells []*model.Cell
	least int // iterations every group takes before the rule is judged
	most  int // iterations at which it stops regardless
	// values holds the primary metric of the valid samples, per cell ID
	// and iteration.
	values map[int64]map[int]float64
	// stored counts the counted samples stored per iteration.
	stored  map[int]int
	stopped bool
}

// newAdaptive returns the rule's state for the cells of an adaptive plan
// (nil for a plan of fixed iterations), with the samples and stops a
// resumed run already stored.
func newAdaptive(p *plan.Plan, cells []model.Cell, samples []model.Sample, stops []model.GroupStop) *adaptive {
	if p.Precision() <= 0 {
		return nil
	}
	a := &adaptive{target: p.Precision(), groups: map[string]*groupState{}}
	byID := map[int64]*groupState{}
	for i := range cells {
		c := &cells[i]
		g := a.groups[c.Group]
		if g == nil {
			g = &groupState{key: c.Group, values: map[int64]map[int]float64{}, stored: map[int]int{}}
			a.groups[c.Group] = g
		}
		g.cells = append(g.cells, c)
		g.least = max(g.least, p.MinIterationsFor(c))
		g.most = max(g.most, c.Iterations)
		g.values[c.ID] = map[int]float64{}
		byID[c.ID] = g
	}
	for i := range samples {
		if g := byID[samples[i].CellID]; g != nil {
			g.add(&samples[i])
		}
	}
	for _, st := range stops {
		if g := a.groups[st.Group]; g != nil {
			g.stopped = true
		}
	}
	return a
}

// add counts a stored sample.
func (g *groupState) add(s *model.Sample) {
	if s.Warmup || s.Iteration < 0 {
		return
	}
	g.stored[s.Iteration]++
	if s.Status == model.StatusOK && !math.IsNaN(s.Value) {
		g.values[s.CellID][s.Iteration] = s.Value
	}
}

// stopped reports whether the step's group has stopped iterating.
func (a *adaptive) stopped(s Step) bool {
	g := a.groups[s.Cell.Group]
	return g != nil && g.stopped && !s.Warmup()
}

// record counts the sample a step stored and judges the rule when it
// completes an iteration of its group: it returns the group's stop, or nil
// while the group goes on.
func (a *adaptive) record(s *model.Sample, c *model.Cell) *model.GroupStop {
	g := a.groups[c.Group]
	if g == nil || g.stopped {
		return nil
	}
	g.add(s)
	return a.judge(g)
}

// judge applies the rule to a group after its last complete iteration.
func (a *adaptive) judge(g *groupState) *model.GroupStop {
	n := 0 // complete iterations, in order
	for g.stored[n] == len(g.cells) {
		n++
	}
	if n < g.least {
		return nil
	}
	var pairs []stats.PairValues
	for i, x := range g.cells {
		for _, y := range g.cells[i+1:] {
			pairs = append(pairs, stats.PairValues{A: y.Protocol, B: x.Protocol, ByIterA: g.values[y.ID], ByIterB: g.values[x.ID]})
		}
	}
	prec := stats.GroupPrecision(pairs)
	st := &model.GroupStop{Group: g.key, Iterations: n, Precision: prec.Worst, WorstPair: prec.WorstPair}
	switch {
	case prec.Worst <= a.target:
		st.Reason = model.StopPrecision
	case n >= g.most:
		st.Reason = model.StopMaximum
	default:
		return nil
	}
	g.stopped = true
	return st
}

// judgeAll applies the rule to every group not yet stopped (a resumed run
// whose last iteration was stored but not judged), returning the stops.
func (a *adaptive) judgeAll() []*model.GroupStop {
	var out []*model.GroupStop
	for _, g := range a.groups {
		if !g.stopped {
			if st := a.judge(g); st != nil {
				out = append(out, st)
			}
		}
	}
	return out
}

// storeStop records a group's stop in the database.
func (r *run) storeStop(ctx context.Context, st *model.GroupStop) error {
	return r.db.SetGroupStop(context.WithoutCancel(ctx), r.runRec.ID, *st)
}
