package stats

import (
	"fmt"
	"slices"
	"strings"
)

// Tree is a decision tree over the factors of a test's configurations (its
// groups) that names the best protocol(s) of each region, as the page-load
// study drew it.
//
// Each configuration is labelled with its best set (Group.BestLabel: the
// protocols no other protocol beats by the page-load rule, "h2 = h3" for a
// tie). The features are the factors that vary between configurations, in
// plan order, then the client and the congestion control if they vary, then
// the scenario name if configurations would otherwise be indistinguishable.
// The tree is grown by recursive partitioning (ID3-style, multiway): a node
// whose configurations share one label is a leaf; otherwise it is split on
// the unused feature whose values partition its configurations with the
// lowest weighted Gini impurity of the labels (ties go to the earlier
// feature), one branch per value in plan order. A node with no feature left
// that separates its configurations is a mixed leaf that lists its labels
// with their counts. Finally, sibling branches that are pure leaves with the
// same label are merged into one branch listing their values.
type Tree struct {
	Features []string // candidate features, in order
	Root     *Node
	// Excluded counts the configurations left out because their best set is
	// unknown (a pair without paired runs, or a single protocol).
	Excluded int
}

// Node is a node of a Tree.
type Node struct {
	Feature  string   // the split feature; "" at a leaf
	Branches []Branch // one per value (or merged values) of Feature
	// Labels are the labels of the configurations under the node with
	// their counts, most frequent first (ties in label order).
	Labels []LabelCount
	N      int // configurations under the node
}

// Branch is one outgoing edge of a split.
type Branch struct {
	Values []string // feature values leading here
	Node   *Node
}

// LabelCount is a best-set label and how many configurations carry it.
type LabelCount struct {
	Label string
	Count int
}

// Leaf reports whether n is a leaf.
func (n *Node) Leaf() bool { return n.Feature == "" }

// Pure reports whether every configuration under n has the same label.
func (n *Node) Pure() bool { return len(n.Labels) == 1 }

type treeRow struct {
	values map[string]string
	label  string
}

// BuildTree grows the tree over groups (typically one test's groups). It
// returns nil when fewer than two groups have a known best set.
func BuildTree(groups []*Group) *Tree {
	t := &Tree{}
	var rows []treeRow
	var known []*Group
	for _, g := range groups {
		if g.Best == nil {
			t.Excluded++
			continue
		}
		known = append(known, g)
	}
	if len(known) < 2 {
		return nil
	}
	// candidate features, in plan order
	var feats []string
	vals := map[string][]string{}
	add := func(name, v string) {
		if !slices.Contains(feats, name) {
			feats = append(feats, name)
		}
		if !slices.Contains(vals[name], v) {
			vals[name] = append(vals[name], v)
		}
	}
	for _, g := range known {
		for _, f := range g.Factors {
			add(f.Name, f.Value)
		}
	}
	for _, g := range known {
		add("client", g.Client)
		add("cc", g.CC)
	}
	rowOf := func(g *Group) treeRow {
		r := treeRow{values: map[string]string{"client": g.Client, "cc": g.CC, "scenario": g.Scenario}, label: g.BestLabel()}
		for _, f := range g.Factors {
			r.values[f.Name] = f.Value
		}
		return r
	}
	for _, g := range known {
		rows = append(rows, rowOf(g))
	}
	for _, f := range feats {
		for _, r := range rows {
			if _, ok := r.values[f]; !ok {
				r.values[f] = "(none)"
				add(f, "(none)")
			}
		}
	}
	// keep the features that vary
	feats = slices.DeleteFunc(feats, func(f string) bool {
		first := rows[0].values[f]
		for _, r := range rows[1:] {
			if r.values[f] != first {
				return false
			}
		}
		return true
	})
	// the scenario name, when configurations are otherwise indistinguishable
	seen := map[string]string{}
	for _, r := range rows {
		var sig strings.Builder
		for _, f := range feats {
			sig.WriteString(r.values[f] + "\x00")
		}
		if sc, ok := seen[sig.String()]; ok && sc != r.values["scenario"] {
			feats = append(feats, "scenario")
			for _, g := range known {
				add("scenario", g.Scenario)
			}
			break
		}
		seen[sig.String()] = r.values["scenario"]
	}
	t.Features = feats
	t.Root = grow(rows, feats, vals)
	return t
}

func labelCounts(rows []treeRow) []LabelCount {
	m := map[string]int{}
	for _, r := range rows {
		m[r.label]++
	}
	out := make([]LabelCount, 0, len(m))
	for l, n := range m {
		out = append(out, LabelCount{l, n})
	}
	slices.SortFunc(out, func(a, b LabelCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Label, b.Label)
	})
	return out
}

func gini(rows []treeRow) float64 {
	n := float64(len(rows))
	g := 1.0
	for _, lc := range labelCounts(rows) {
		p := float64(lc.Count) / n
		g -= p * p
	}
	return g
}

func grow(rows []treeRow, feats []string, vals map[string][]string) *Node {
	n := &Node{Labels: labelCounts(rows), N: len(rows)}
	if n.Pure() {
		return n
	}
	best, bestImp := -1, 0.0
	var bestParts [][]treeRow
	var bestVals []string
	for i, f := range feats {
		var parts [][]treeRow
		var pv []string
		for _, v := range vals[f] {
			var part []treeRow
			for _, r := range rows {
				if r.values[f] == v {
					part = append(part, r)
				}
			}
			if len(part) > 0 {
				parts = append(parts, part)
				pv = append(pv, v)
			}
		}
		if len(parts) < 2 {
			continue
		}
		var imp float64
		for _, p := range parts {
			imp += float64(len(p)) / float64(len(rows)) * gini(p)
		}
		if best < 0 || imp < bestImp-1e-12 {
			best, bestImp, bestParts, bestVals = i, imp, parts, pv
		}
	}
	if best < 0 {
		return n // mixed leaf
	}
	n.Feature = feats[best]
	rest := slices.Delete(slices.Clone(feats), best, best+1)
	for i, p := range bestParts {
		child := grow(p, rest, vals)
		if child.Leaf() && child.Pure() {
			merged := false
			for j := range n.Branches {
				b := &n.Branches[j]
				if b.Node.Leaf() && b.Node.Pure() && b.Node.Labels[0].Label == child.Labels[0].Label {
					b.Values = append(b.Values, bestVals[i])
					b.Node.N += child.N
					b.Node.Labels[0].Count += child.N
					merged = true
					break
				}
			}
			if merged {
				continue
			}
		}
		n.Branches = append(n.Branches, Branch{Values: []string{bestVals[i]}, Node: child})
	}
	return n
}

// String renders the tree as indented text, one branch per line, e.g.
//
//	delay = 9ms
//	  loss = 0%: h2 = h3 (4)
//	  loss = 2%: h3 (4)
//	delay = 109ms: h3 (8)
func (t *Tree) String() string {
	if t == nil || t.Root == nil {
		return ""
	}
	var b strings.Builder
	if t.Root.Leaf() {
		fmt.Fprintf(&b, "all: %s\n", t.Root.LeafText())
		return b.String()
	}
	writeNode(&b, t.Root, "")
	return b.String()
}

func writeNode(b *strings.Builder, n *Node, indent string) {
	for _, br := range n.Branches {
		fmt.Fprintf(b, "%s%s = %s", indent, n.Feature, strings.Join(br.Values, ", "))
		if br.Node.Leaf() {
			fmt.Fprintf(b, ": %s\n", br.Node.LeafText())
			continue
		}
		b.WriteString("\n")
		writeNode(b, br.Node, indent+"  ")
	}
}

// LeafText describes a leaf: "h3 (4)" when pure, "mixed: h3 (3), h2 (1)"
// otherwise.
func (n *Node) LeafText() string {
	parts := make([]string, len(n.Labels))
	for i, lc := range n.Labels {
		parts[i] = fmt.Sprintf("%s (%d)", lc.Label, lc.Count)
	}
	if n.Pure() {
		return parts[0]
	}
	return "mixed: " + strings.Join(parts, ", ")
}
