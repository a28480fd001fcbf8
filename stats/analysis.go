package stats

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/quicbench/quicbench/model"
)

// Analysis is everything the report needs about one dataset.
type Analysis struct {
	Config Config
	Cells  []*CellStats // in plan order
	Groups []*Group     // in plan order of their first cell
	Tests  []*TestSet   // in plan order of their first cell
	// Comparisons are all comparisons of all groups, adjusted within their
	// families (Config.CorrectionScope).
	Comparisons []*Comparison
	// Implementations are the protocols measured by more than one client
	// and server pair, each compared with its reference pair; their
	// comparisons form a family of their own (ScopeImplementations).
	Implementations []*ImplSet
}

// Group is a set of cells that differ only by protocol.
type Group struct {
	Key      string // model.Cell.Group
	Test     string
	Scenario string
	Client   string
	Server   string // peers.Servers() ("" is quicbench's own)
	CC       string
	Factors  []model.Factor
	Cells    []*CellStats // in protocol display order
	// Comparisons of every pair of cells: the QUIC cell is A when exactly
	// one of the two runs over QUIC, otherwise the later protocol in display
	// order (h2 vs h1).
	Comparisons []*Comparison
	// Best lists the protocols that no other protocol of the group beats by
	// the page-load rule (several when they tie), in display order. It is
	// nil when a pair of the group has no paired runs.
	Best []string
}

// Label is the group's short description: the scenario and the factor
// values it does not already name, then the client and congestion control
// when they are not the defaults (builtin, cubic). A scenario named after
// its grid coordinates ("grid-10mbit-9ms": every token after the first is a
// factor value) is replaced by the factors themselves.
func (g *Group) Label() string {
	tokens := strings.FieldsFunc(g.Scenario, func(r rune) bool { return strings.ContainsRune("-_/,=:;· ", r) })
	isValue := func(tok string) bool {
		for _, f := range g.Factors {
			if f.Value == tok {
				return true
			}
		}
		return false
	}
	redundant := len(tokens) > 1
	for _, t := range tokens[min(1, len(tokens)):] {
		redundant = redundant && isValue(t)
	}
	var parts []string
	if !redundant {
		parts = append(parts, g.Scenario)
	}
	for _, f := range g.Factors {
		if redundant || !slices.Contains(tokens, f.Value) && !strings.Contains(g.Scenario, f.Name+"="+f.Value) {
			parts = append(parts, f.Name+"="+f.Value)
		}
	}
	if g.Client != "" && g.Client != model.ClientBuiltin {
		parts = append(parts, g.Client)
	}
	if g.Server != "" && g.Server != model.ServerQuicbench {
		parts = append(parts, "server "+g.Server)
	}
	if g.CC != "" && g.CC != "cubic" {
		parts = append(parts, g.CC)
	}
	if len(parts) == 0 {
		return g.Scenario
	}
	return strings.Join(parts, " · ")
}

// BestLabel joins Best with " = "; "no clear winner" when the rule's
// relation has a cycle, "" when Best is unknown.
func (g *Group) BestLabel() string {
	if g.Best == nil {
		return ""
	}
	if len(g.Best) == 0 {
		return "no clear winner"
	}
	return strings.Join(g.Best, " = ")
}

// Cell returns the group's cell of protocol proto, or nil.
func (g *Group) Cell(proto string) *CellStats {
	for _, c := range g.Cells {
		if c.Cell.Protocol == proto {
			return c
		}
	}
	return nil
}

// TestSet is the groups of one test, with its decision tree. A test whose
// cells use several primary metrics is split into one set per metric.
type TestSet struct {
	Name   string // the test, or "test · metric" when split
	Groups []*Group
	// Tree names the best protocols per region of the factor space; nil
	// when fewer than two groups have a known best set.
	Tree *Tree
}

// Analyze computes summaries, comparisons (Holm-adjusted within their
// families: one per test set, or the whole run, after Config.CorrectionScope),
// page-load rule outcomes and decision trees for ds. It fails on a dataset
// that is not self-consistent (duplicate cell ids or keys, samples of unknown
// cells), naming the offending item.
func Analyze(ds *model.Dataset, c Config) (*Analysis, error) {
	if ds == nil {
		return nil, fmt.Errorf("stats: nil dataset")
	}
	c = c.WithDefaults()
	if c.Level <= 0 || c.Level >= 1 {
		return nil, fmt.Errorf("stats: confidence level %v is not in (0, 1)", c.Level)
	}
	if c.Alpha <= 0 || c.Alpha >= 1 {
		return nil, fmt.Errorf("stats: alpha %v is not in (0, 1)", c.Alpha)
	}
	if c.CorrectionScope != ScopeFamily && c.CorrectionScope != ScopeRun {
		return nil, fmt.Errorf("stats: correction scope %q is neither %q nor %q", c.CorrectionScope, ScopeFamily, ScopeRun)
	}
	if c.MinEffect >= 1 {
		return nil, fmt.Errorf("stats: smallest effect of interest %v is not below 1 (100%%)", c.MinEffect)
	}
	if c.Resamples < 0 {
		return nil, fmt.Errorf("stats: %d bootstrap resamples", c.Resamples)
	}
	a := &Analysis{Config: c}
	byID := make(map[int64]*CellStats, len(ds.Cells))
	keys := make(map[string]bool, len(ds.Cells))
	for i := range ds.Cells {
		cell := &ds.Cells[i]
		if _, dup := byID[cell.ID]; dup {
			return nil, fmt.Errorf("stats: cell %q: duplicate cell id %d", cell.Key, cell.ID)
		}
		if keys[cell.Key] {
			return nil, fmt.Errorf("stats: cell id %d: duplicate cell key %q", cell.ID, cell.Key)
		}
		keys[cell.Key] = true
		cs := &CellStats{Cell: cell}
		byID[cell.ID] = cs
		a.Cells = append(a.Cells, cs)
	}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		cs, ok := byID[s.CellID]
		if !ok {
			return nil, fmt.Errorf("stats: sample %d (iteration %d) refers to unknown cell id %d", s.ID, s.Iteration, s.CellID)
		}
		switch {
		case s.Warmup:
			cs.Warmups++
		case s.Status == model.StatusOK && !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0):
			cs.Samples = append(cs.Samples, s)
		default:
			cs.Failed = append(cs.Failed, s)
		}
	}
	parallel(len(a.Cells), func(i int) {
		cs := a.Cells[i]
		slices.SortStableFunc(cs.Samples, func(x, y *model.Sample) int { return x.Iteration - y.Iteration })
		cs.Summary = Describe(cs.Values(), c, StreamOf(cs.Cell.Key))
		cs.Summary.Failed = len(cs.Failed)
		cs.Transport = summarizeTransport(cs.Samples)
	})

	groups := map[string]*Group{}
	tests := map[string]*TestSet{}
	metrics := map[string][]string{} // metrics used by each test
	for _, cs := range a.Cells {
		if m := metrics[cs.Cell.Test]; !slices.Contains(m, cs.Cell.Metric) {
			metrics[cs.Cell.Test] = append(m, cs.Cell.Metric)
		}
	}
	for _, cs := range a.Cells {
		cell := cs.Cell
		gk := cell.Group
		if gk == "" {
			gk = cell.Key
		}
		g, ok := groups[gk]
		if !ok {
			g = &Group{Key: gk, Test: cell.Test, Scenario: cell.Scenario, Client: cell.Client, Server: cell.Server, CC: cell.CC, Factors: cell.Factors}
			groups[gk] = g
			a.Groups = append(a.Groups, g)
			name := cell.Test
			if len(metrics[cell.Test]) > 1 {
				name += " · " + cell.Metric
			}
			t, ok := tests[name]
			if !ok {
				t = &TestSet{Name: name}
				tests[name] = t
				a.Tests = append(a.Tests, t)
			}
			t.Groups = append(t.Groups, g)
		}
		g.Cells = append(g.Cells, cs)
	}
	type job struct {
		g    *Group
		x, y *CellStats
	}
	var jobs []job
	for _, g := range a.Groups {
		slices.SortStableFunc(g.Cells, func(x, y *CellStats) int {
			return protoRank(x.Cell.Protocol) - protoRank(y.Cell.Protocol)
		})
		for i := range g.Cells {
			for j := i + 1; j < len(g.Cells); j++ {
				x, y := g.Cells[j], g.Cells[i] // later protocol first
				if model.IsQUIC(y.Cell.Protocol) && !model.IsQUIC(x.Cell.Protocol) {
					x, y = y, x
				}
				jobs = append(jobs, job{g, x, y})
			}
		}
	}
	a.Comparisons = make([]*Comparison, len(jobs))
	parallel(len(jobs), func(i int) { a.Comparisons[i] = Compare(jobs[i].x, jobs[i].y, c) })
	for i, j := range jobs {
		j.g.Comparisons = append(j.g.Comparisons, a.Comparisons[i])
	}
	for _, g := range a.Groups {
		g.Best = bestByRule(g)
	}
	// families: the comparisons of one test set (one test and metric), or
	// all of them
	familyOf := map[*Group]string{}
	for _, t := range a.Tests {
		for _, g := range t.Groups {
			familyOf[g] = t.Name
		}
	}
	if c.CorrectionScope == ScopeRun {
		AdjustFamily(a.Comparisons, ScopeRun, c.Alpha)
	} else {
		var names []string
		fam := map[string][]*Comparison{}
		for i, j := range jobs {
			n := familyOf[j.g]
			if _, ok := fam[n]; !ok {
				names = append(names, n)
			}
			fam[n] = append(fam[n], a.Comparisons[i])
		}
		for _, n := range names {
			AdjustFamily(fam[n], n, c.Alpha)
		}
	}
	for _, t := range a.Tests {
		t.Tree = BuildTree(t.Groups)
	}
	a.Implementations = implementationSets(a, c)
	return a, nil
}

// parallel runs f(0..n-1) on GOMAXPROCS goroutines. Every f writes only its
// own result, and each bootstrap draws from its own seeded stream, so the
// outcome does not depend on scheduling.
func parallel(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(i)
			}
		})
	}
	wg.Wait()
}

// protoRank orders protocols as model.Protocols does; unknown ones last.
func protoRank(p string) int {
	if i := slices.Index(model.Protocols, p); i >= 0 {
		return i
	}
	return len(model.Protocols)
}

// bestByRule returns the protocols of g that no other protocol beats by the
// page-load rule; nil if some pair has no paired runs.
func bestByRule(g *Group) []string {
	if len(g.Cells) < 2 {
		return nil
	}
	beaten := map[string]bool{}
	for _, cmp := range g.Comparisons {
		switch cmp.Rule.Outcome {
		case Insufficient:
			return nil
		case ABetter:
			beaten[cmp.B.Cell.Protocol] = true
		case BBetter:
			beaten[cmp.A.Cell.Protocol] = true
		}
	}
	best := []string{}
	for _, cs := range g.Cells {
		if !beaten[cs.Cell.Protocol] {
			best = append(best, cs.Cell.Protocol)
		}
	}
	return best
}
