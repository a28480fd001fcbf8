package stats

import (
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// ScopeImplementations names the family of the comparisons across
// implementations (ImplSet.Comparisons), which are corrected together and
// apart from the protocol comparisons.
const ScopeImplementations = "implementations"

// ImplSet is one protocol over one network and test, measured by several
// implementations: cells that differ only by client and server.
type ImplSet struct {
	Test     string
	Label    string // the group's label without client and server
	Protocol string
	// Cells has one cell per client and server pair, the reference first:
	// quicbench's own client and server when measured, else the first in
	// plan order.
	Cells []*CellStats
	// Comparisons compares Cells[i] (A) with Cells[0] (B) for i >= 1.
	Comparisons []*Comparison
}

// StackName names a cell's client and server implementations for readers,
// e.g. "quic-go → aioquic" (the built-in client is quic-go over QUIC and Go's
// net/http over TCP; so is quicbench's server), from the registry of stacks;
// a name the registry does not know (a contract stack) is shown as it is.
func StackName(c *model.Cell) string {
	return peers.ClientLabel(c.Client, c.Protocol) + " → " + peers.ServerLabel(c.ServerImpl(), c.Protocol)
}

// implementationSets finds the cells of a that differ only by client and
// server, compares each with its set's reference and corrects those
// comparisons as one family (ScopeImplementations).
func implementationSets(a *Analysis, c Config) []*ImplSet {
	type key struct{ test, scenario, factors, cc, proto, metric string }
	keyOf := func(cell *model.Cell) key {
		var f []string
		for _, x := range cell.Factors {
			f = append(f, x.Name+"="+x.Value)
		}
		return key{cell.Test, cell.Scenario, strings.Join(f, ","), cell.CC, cell.Protocol, cell.Metric}
	}
	groupOf := map[*CellStats]*Group{}
	for _, g := range a.Groups {
		for _, cs := range g.Cells {
			groupOf[cs] = g
		}
	}
	sets := map[key]*ImplSet{}
	var order []*ImplSet
	for _, cs := range a.Cells {
		k := keyOf(cs.Cell)
		s, ok := sets[k]
		if !ok {
			s = &ImplSet{Test: cs.Cell.Test, Protocol: cs.Cell.Protocol}
			if g := groupOf[cs]; g != nil {
				s.Label = (&Group{Scenario: g.Scenario, Factors: g.Factors, CC: g.CC}).Label()
			}
			sets[k] = s
			order = append(order, s)
		}
		s.Cells = append(s.Cells, cs)
	}
	var out []*ImplSet
	var all []*Comparison
	for _, s := range order {
		if len(s.Cells) < 2 {
			continue
		}
		ref := slices.IndexFunc(s.Cells, func(cs *CellStats) bool {
			return (cs.Cell.Client == "" || cs.Cell.Client == model.ClientBuiltin) &&
				cs.Cell.ServerImpl() == model.ServerQuicbench
		})
		if ref > 0 {
			s.Cells[0], s.Cells[ref] = s.Cells[ref], s.Cells[0]
		}
		for _, cs := range s.Cells[1:] {
			cmp := Compare(cs, s.Cells[0], c)
			s.Comparisons = append(s.Comparisons, cmp)
			all = append(all, cmp)
		}
		out = append(out, s)
	}
	AdjustFamily(all, ScopeImplementations, c.Alpha)
	return out
}
