package stats

import (
	"math"
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// ImplSpread is one test over one network and configuration in which at
// least one protocol was measured by several implementations (cells that
// differ only by client and server, ImplSet): every cell of it, grouped by
// protocol, the protocol comparisons each client-and-server pair (stack)
// made, and how the variation of the medians splits between protocol and
// implementation (Decomposition). It answers "is it the protocol, or the
// implementation?" for one configuration.
type ImplSpread struct {
	Test  string
	Label string // the configuration without client and server (ImplSet.Label)
	// Metric, Unit and HigherIsBetter describe the primary metric.
	Metric, Unit   string
	HigherIsBetter bool
	// Protocols in display order (model.Protocols).
	Protocols []string
	// Rows has one row per cell: by protocol in display order, then by
	// stack in plan order.
	Rows []SpreadRow
	// Stacks lists the stacks measured with at least two protocols, with
	// their protocol comparisons (from Analysis.Groups: paired, tested,
	// Holm-corrected in their families as everywhere in the report).
	Stacks []StackComparisons
	// Decomposition splits the variation of the log medians.
	Decomposition Decomposition
}

// SpreadRow is one cell of an ImplSpread.
type SpreadRow struct {
	Protocol string
	Stack    string // StackKey of the cell
	Cell     *CellStats
}

// StackComparisons is one stack's protocol comparisons in an ImplSpread.
type StackComparisons struct {
	Stack       string // StackKey
	Comparisons []*Comparison
}

// StackKey names a cell's client and server as plans do: "builtin →
// quicbench", "chromium → caddy". Unlike StackName it does not depend on
// the protocol, so the h2 and h3 cells of one stack share it.
func StackKey(c *model.Cell) string {
	client := c.Client
	if client == "" {
		client = model.ClientBuiltin
	}
	return client + " → " + c.ServerImpl()
}

// Decomposition designs.
const (
	// DesignCrossed: at least two stacks measured every protocol of the
	// configuration; the table of their log medians (stacks × protocols)
	// is decomposed two ways, additively, without replication.
	DesignCrossed = "crossed"
	// DesignNested: fewer than two stacks measured every protocol; the log
	// medians of all cells are split between protocols and the
	// implementations within each protocol (one-way, implementation
	// nested in protocol), so a stack's own speed and its protocol
	// difference cannot be told apart.
	DesignNested = "nested"
)

// Decomposition is the sum-of-squares decomposition of the log medians of
// an ImplSpread (docs/statistics.md, "Protocol or implementation?"). The
// shares are descriptive: they say where the medians differ, not whether
// a difference is significant (the comparisons say that).
type Decomposition struct {
	Design string // DesignCrossed, DesignNested, or "" when none is possible
	// Stacks and Cells are the stacks and cells that entered it.
	Stacks, Cells int
	// Protocol, Implementation and Interaction are shares of the total
	// sum of squares about the grand mean; they add up to 1. Crossed:
	// protocol main effect, stack main effect, and their interaction (how
	// much the protocol difference changes from stack to stack). Nested:
	// between protocols, and between implementations within a protocol
	// (Interaction is NaN). NaN when the medians do not vary, or some
	// median is not positive.
	Protocol, Implementation, Interaction float64
	// Effects are the protocol differences the decomposition estimates,
	// one per protocol pair with A the QUIC protocol (or the later one),
	// as ratios minus 1: exp(mean log median of A - that of B) - 1, the
	// ratio of geometric means over the stacks (crossed: the complete
	// stacks; nested: every cell of each protocol).
	Effects []ProtocolEffect
}

// ProtocolEffect is one protocol pair's difference in a Decomposition.
type ProtocolEffect struct {
	A, B string
	Rel  float64 // geometric-mean ratio of A to B, minus 1
}

// Spreads finds the configurations of an analysis in which a protocol was
// measured by several implementations (Analysis.Implementations) and
// builds their ImplSpreads, in plan order.
func (a *Analysis) Spreads() []*ImplSpread {
	type key struct{ test, scenario, factors, cc, metric string }
	keyOf := func(cell *model.Cell) key {
		var f []string
		for _, x := range cell.Factors {
			f = append(f, x.Name+"="+x.Value)
		}
		return key{cell.Test, cell.Scenario, strings.Join(f, ","), cell.CC, cell.Metric}
	}
	multi := map[key]string{} // configurations with an ImplSet, and their label
	for _, s := range a.Implementations {
		multi[keyOf(s.Cells[0].Cell)] = s.Label
	}
	groupOf := map[*CellStats]*Group{}
	for _, g := range a.Groups {
		for _, cs := range g.Cells {
			groupOf[cs] = g
		}
	}
	var order []key
	cells := map[key][]*CellStats{}
	for _, cs := range a.Cells {
		k := keyOf(cs.Cell)
		if _, ok := multi[k]; !ok {
			continue
		}
		if _, seen := cells[k]; !seen {
			order = append(order, k)
		}
		cells[k] = append(cells[k], cs)
	}
	var out []*ImplSpread
	for _, k := range order {
		cs := cells[k]
		first := cs[0].Cell
		sp := &ImplSpread{Test: first.Test, Label: multi[k], Metric: first.Metric, Unit: first.Unit, HigherIsBetter: first.HigherIsBetter}
		var stacks []string
		for _, c := range cs {
			if !slices.Contains(sp.Protocols, c.Cell.Protocol) {
				sp.Protocols = append(sp.Protocols, c.Cell.Protocol)
			}
			if s := StackKey(c.Cell); !slices.Contains(stacks, s) {
				stacks = append(stacks, s)
			}
		}
		slices.SortStableFunc(sp.Protocols, func(x, y string) int { return protoRank(x) - protoRank(y) })
		for _, p := range sp.Protocols {
			for _, s := range stacks {
				for _, c := range cs {
					if c.Cell.Protocol == p && StackKey(c.Cell) == s {
						sp.Rows = append(sp.Rows, SpreadRow{Protocol: p, Stack: s, Cell: c})
					}
				}
			}
		}
		seen := map[*Group]bool{}
		for _, s := range stacks {
			for _, c := range cs {
				g := groupOf[c]
				if StackKey(c.Cell) != s || g == nil || seen[g] || len(g.Comparisons) == 0 {
					continue
				}
				seen[g] = true
				sc := StackComparisons{Stack: s, Comparisons: slices.Clone(g.Comparisons)}
				// QUIC-vs-TCP comparisons first
				slices.SortStableFunc(sc.Comparisons, func(x, y *Comparison) int { return quicVsTCP(y) - quicVsTCP(x) })
				sp.Stacks = append(sp.Stacks, sc)
			}
		}
		sp.Decomposition = Decompose(sp.Rows, sp.Protocols)
		out = append(out, sp)
	}
	return out
}

func quicVsTCP(c *Comparison) int {
	if model.IsQUIC(c.A.Cell.Protocol) && !model.IsQUIC(c.B.Cell.Protocol) {
		return 1
	}
	return 0
}

// Decompose splits the variation of the log medians of rows (cells of one
// configuration, by protocol and stack) between protocol and
// implementation; protocols gives their order. With at least two
// protocols and two stacks that measured every one of them, the design is
// crossed: with y_sp the log median of stack s and protocol p over the S
// complete stacks and P protocols, m their mean, a_s and b_p the stack and
// protocol means minus m,
//
//	SS_protocol = S·Σ_p b_p², SS_stack = P·Σ_s a_s², SS_interaction = Σ (y_sp - m - a_s - b_p)²
//
// and each share is its part of SS_total = Σ (y_sp - m)², which they add up
// to. Otherwise, when some protocol has two cells, nested: over every
// cell, SS_protocol = Σ_p n_p (ȳ_p - m)² and SS_implementation = Σ (y - ȳ_p)²
// with m the mean over all cells. Rows without a valid sample (a NaN
// median) are left out as not measured; a median that is not positive, or
// infinite, makes every share NaN.
func Decompose(rows []SpreadRow, protocols []string) Decomposition {
	d := Decomposition{Protocol: math.NaN(), Implementation: math.NaN(), Interaction: math.NaN()}
	if len(protocols) < 2 {
		return d
	}
	logm := map[[2]string]float64{}
	var stacks []string
	ok := true
	var kept []SpreadRow
	for _, r := range rows {
		m := r.Cell.Summary.Median
		if math.IsNaN(m) {
			continue // no valid sample: not measured
		}
		kept = append(kept, r)
		if !(m > 0) || math.IsInf(m, 0) {
			ok = false
		}
		logm[[2]string{r.Stack, r.Protocol}] = math.Log(m)
		if !slices.Contains(stacks, r.Stack) {
			stacks = append(stacks, r.Stack)
		}
	}
	var complete []string
	for _, s := range stacks {
		all := true
		for _, p := range protocols {
			_, has := logm[[2]string{s, p}]
			all = all && has
		}
		if all {
			complete = append(complete, s)
		}
	}
	pairs := func(mean func(p string) float64) []ProtocolEffect {
		var out []ProtocolEffect
		for i := range protocols {
			for j := i + 1; j < len(protocols); j++ {
				a, b := protocols[j], protocols[i] // later protocol first
				if model.IsQUIC(b) && !model.IsQUIC(a) {
					a, b = b, a
				}
				if e := math.Exp(mean(a)-mean(b)) - 1; !math.IsNaN(e) {
					out = append(out, ProtocolEffect{A: a, B: b, Rel: e})
				}
			}
		}
		return out
	}
	switch {
	case len(complete) >= 2:
		d.Design, d.Stacks, d.Cells = DesignCrossed, len(complete), len(complete)*len(protocols)
		if !ok {
			return d
		}
		S, P := float64(len(complete)), float64(len(protocols))
		var m float64
		for _, s := range complete {
			for _, p := range protocols {
				m += logm[[2]string{s, p}]
			}
		}
		m /= S * P
		rowMean := func(s string) float64 {
			var t float64
			for _, p := range protocols {
				t += logm[[2]string{s, p}]
			}
			return t / P
		}
		colMean := func(p string) float64 {
			var t float64
			for _, s := range complete {
				t += logm[[2]string{s, p}]
			}
			return t / S
		}
		var ssP, ssS, ssI, ssT float64
		for _, p := range protocols {
			ssP += S * sq(colMean(p)-m)
		}
		for _, s := range complete {
			ssS += P * sq(rowMean(s)-m)
			for _, p := range protocols {
				y := logm[[2]string{s, p}]
				ssT += sq(y - m)
				ssI += sq(y - rowMean(s) - colMean(p) + m)
			}
		}
		d.Effects = pairs(colMean)
		if ssT > 0 {
			d.Protocol, d.Implementation, d.Interaction = ssP/ssT, ssS/ssT, ssI/ssT
		}
	default:
		rows = kept
		n := map[string]int{}
		sum := map[string]float64{}
		for _, r := range rows {
			n[r.Protocol]++
			sum[r.Protocol] += logm[[2]string{r.Stack, r.Protocol}]
		}
		multi := false
		for _, p := range protocols {
			multi = multi || n[p] >= 2
		}
		if !multi || len(n) < 2 {
			return d
		}
		d.Design, d.Stacks, d.Cells = DesignNested, len(stacks), len(rows)
		if !ok {
			return d
		}
		mean := func(p string) float64 { return sum[p] / float64(n[p]) }
		var m float64
		for _, r := range rows {
			m += logm[[2]string{r.Stack, r.Protocol}]
		}
		m /= float64(len(rows))
		var ssP, ssW float64
		for _, p := range protocols {
			if n[p] > 0 {
				ssP += float64(n[p]) * sq(mean(p)-m)
			}
		}
		for _, r := range rows {
			ssW += sq(logm[[2]string{r.Stack, r.Protocol}] - mean(r.Protocol))
		}
		d.Effects = pairs(mean)
		if t := ssP + ssW; t > 0 {
			d.Protocol, d.Implementation = ssP/t, ssW/t
		}
	}
	return d
}

func sq(x float64) float64 { return x * x }
