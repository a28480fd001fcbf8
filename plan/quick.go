package plan

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// QuickIterations is the iteration count of every test in a Quick variant.
const QuickIterations = 2

// Quick returns a small variant of the plan for smoke runs and CI: every
// test entry, protocol, client and congestion control is kept, but
//   - every test runs QuickIterations iterations, without warm-up;
//   - only the first and the last scenario entries are kept (plus, for a
//     test limited to other scenarios, the first of those), and every grid
//     keeps only the first value of each dimension;
//   - each parameter list keeps its first and last values, after capping
//     sizes at 1MB (cpu: 10MB), objects, requests and segments at 10 and
//     stream intervals at 20ms;
//   - an entry whose capped cells repeat an earlier entry's loses the
//     repeated values, or the whole entry (a note says which);
//   - an entry that runs browser clients beside the built-in one keeps
//     the browsers on its first scenario only (quickBrowsers).
//
// The result is named NAME-quick; its YAML is a canonical rendering.
func (p *Plan) Quick() (*Plan, error) {
	if p == nil || p.cells == nil {
		return nil, fmt.Errorf("plan: Quick on a plan that was not parsed")
	}
	d := p.d.clone()
	d.iterations = min(d.iterations, QuickIterations)
	d.precision, d.maxIterations, d.maxIterAt = 0, 0, pos{} // a smoke run: fixed iterations
	d.warmup = false
	var notes []string

	// scenario entries: first, last, and the first one of each limited test
	keep := map[int]bool{0: true, len(d.scenarios) - 1: true}
	entryOf := func(name string) int {
		for i, s := range d.scenarios {
			if s.name == name {
				return i
			}
		}
		for i, b := range p.expBlocks() {
			for _, pi := range b {
				if p.points[pi].Name == name {
					return i
				}
			}
		}
		return -1
	}
	for _, t := range d.tests {
		if t.scenarios == nil {
			continue
		}
		covered := false
		for _, n := range t.scenarios {
			if keep[entryOf(n)] {
				covered = true
			}
		}
		if !covered {
			keep[entryOf(t.scenarios[0])] = true
		}
	}
	// map each test's selections to entries before the entries change
	sel := make([][]int, len(d.tests))
	for i, t := range d.tests {
		for _, n := range t.scenarios {
			if e := entryOf(n); keep[e] && !containsInt(sel[i], e) {
				sel[i] = append(sel[i], e)
			}
		}
	}
	var scen []scenDoc
	newIndex := map[int]int{}
	for i, s := range d.scenarios {
		if !keep[i] {
			continue
		}
		for k := range s.grid {
			s.grid[k].values = s.grid[k].values[:1]
			s.grid[k].valAt = s.grid[k].valAt[:1]
		}
		newIndex[i] = len(scen)
		scen = append(scen, s)
	}
	d.scenarios = scen
	for i := range d.tests {
		t := &d.tests[i]
		if t.iterations > 0 {
			t.iterations = min(t.iterations, QuickIterations)
		}
		t.warmup = nil
		if t.scenarios != nil {
			t.scenarios = nil
			t.scenAt = make([]pos, len(sel[i]))
			for _, e := range sel[i] {
				s := scen[newIndex[e]]
				if s.name != "" {
					t.scenarios = append(t.scenarios, s.name)
				} else {
					t.scenarios = append(t.scenarios, gridPointName(s))
				}
			}
		}
		t.params = quickParams(t)
	}

	// drop what repeats an earlier entry's cells
	seen := map[string]int{}
	var tests []testDoc
	for i := range d.tests {
		t := d.tests[i]
		keys, err := entryKeys(d, p, t)
		if err != nil {
			return nil, err
		}
		if overlaps(keys, seen) {
			t.params = pruneParams(d, p, t, seen)
			if t.params == nil {
				notes = append(notes, fmt.Sprintf("quick: tests[%d] (%s) dropped: once capped it repeats cells of an earlier test", i, t.test))
				continue
			}
			notes = append(notes, fmt.Sprintf("quick: tests[%d] (%s) lost parameter values that, once capped, repeat cells of an earlier test", i, t.test))
			if keys, err = entryKeys(d, p, t); err != nil {
				return nil, err
			}
		}
		for _, k := range keys {
			seen[k] = i
		}
		t.index = len(tests)
		tests = append(tests, t)
	}
	d.tests, notes = quickBrowsers(d, tests, scen, notes)

	q := &Plan{Name: p.Name + "-quick", Seed: p.Seed, Timeout: p.Timeout, d: d}
	q.Description = "Quick variant of " + p.Name + " (fewer iterations, scenarios and parameter values; every test kept)."
	if p.Description != "" {
		q.Description += " " + p.Description
	}
	q.d.name, q.d.description = q.Name, q.Description
	text := append([]byte("# Quick variant of plan "+p.Name+" (quicbench plans "+p.Name+" --quick).\n"), q.render()...)
	out, err := Parse(q.Name+".yaml", text)
	if err != nil {
		return nil, fmt.Errorf("plan: quick variant of %s does not parse (a bug): %w", p.Name, err)
	}
	out.notes = append(notes, out.notes...)
	return out, nil
}

// quickBrowsers splits each of tests that runs a browser client beside a
// client that is not one over more than one of the kept scenarios scen:
// the browser clients keep the entry's first scenario only, in an entry
// of their own after it. A browser's sample costs a browser start and
// runs alone on the machine; one network suffices to set its results
// beside the built-in client's in a smoke run. The entries are
// renumbered; one note says which clients and scenarios.
func quickBrowsers(d doc, tests []testDoc, scen []scenDoc, notes []string) ([]testDoc, []string) {
	var out []testDoc
	var who, where []string
	for _, t := range tests {
		clients := t.clients
		if clients == nil {
			clients = d.clients
		}
		var browsers, others []string
		for _, c := range clients {
			if peers.IsBrowser(c) {
				if clientUnsupported(lookupTest(t.test), c) == "" {
					browsers = append(browsers, c)
				}
			} else {
				others = append(others, c)
			}
		}
		names := t.scenarios
		if names == nil {
			for _, s := range scen {
				if s.name != "" {
					names = append(names, s.name)
				} else {
					names = append(names, gridPointName(s))
				}
			}
		}
		if len(browsers) == 0 || len(others) == 0 || len(names) < 2 {
			t.index = len(out)
			out = append(out, t)
			continue
		}
		b := t
		t.clients, t.index = others, len(out)
		b.clients, b.index = browsers, len(out)+1
		b.scenarios, b.scenAt = names[:1], make([]pos, 1)
		b.params = append([]paramVals(nil), t.params...)
		out = append(out, t, b)
		for _, c := range browsers {
			if !contains(who, c) {
				who = append(who, c)
			}
		}
		if !contains(where, names[0]) {
			where = append(where, names[0])
		}
	}
	if len(who) > 0 {
		subject := "client " + who[0] + " runs"
		if len(who) > 1 {
			subject = "clients " + strings.Join(who, ", ") + " run"
		}
		notes = append(notes, fmt.Sprintf("quick: %s beside the built-in client on each test's first scenario only (%s): browser samples run alone",
			subject, strings.Join(where, ", ")))
	}
	return out, notes
}

func gridPointName(s scenDoc) string {
	name := ""
	for i, g := range s.grid {
		if i > 0 {
			name += ","
		}
		name += g.name + "=" + g.values[0]
	}
	if s.name != "" {
		name = s.name + ":" + name
	}
	return name
}

// expBlocks recomputes which points each scenario entry produced.
func (p *Plan) expBlocks() [][]int {
	e := &expander{p: &Plan{d: p.d, file: p.file}, file: p.file}
	e.scenarios()
	return e.blocks
}

// quickParams caps, deduplicates and trims the parameter values of a test.
func quickParams(t *testDoc) []paramVals {
	def := lookupTest(t.test)
	var out []paramVals
	for _, pd := range def.params {
		var vals []string
		explicit := false
		for _, pv := range t.params {
			if pv.name == pd.name {
				vals, explicit = pv.values, true
			}
		}
		if !explicit {
			if pd.def == "" {
				continue
			}
			vals = []string{pd.def}
		}
		var capped []string
		for _, v := range vals {
			c := capValue(&pd, v)
			if !contains(capped, c) {
				capped = append(capped, c)
			}
		}
		if len(capped) > 2 {
			capped = []string{capped[0], capped[len(capped)-1]}
		}
		if explicit || len(capped) != 1 || capped[0] != pd.def {
			out = append(out, paramVals{name: pd.name, values: capped})
		}
	}
	return out
}

func capValue(pd *paramDef, v string) string {
	if pd.quickMax == 0 {
		return v
	}
	switch pd.kind {
	case kindSize:
		if n, err := ParseSize(v); err == nil && n > pd.quickMax {
			return FormatSize(pd.quickMax)
		}
	case kindInt:
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > pd.quickMax {
			return strconv.FormatInt(pd.quickMax, 10)
		}
	case kindDuration:
		if n, err := parseDuration(v); err == nil && int64(n) > pd.quickMax {
			return formatDuration(time.Duration(pd.quickMax))
		}
	}
	return v
}

// entryKeys expands one test entry of d and returns its cell keys.
func entryKeys(d doc, p *Plan, t testDoc) ([]string, error) {
	cells, err := entryCells(d, p, t)
	var keys []string
	for _, c := range cells {
		keys = append(keys, c.Key)
	}
	return keys, err
}

func entryCells(d doc, p *Plan, t testDoc) ([]model.Cell, error) {
	t.index = 0
	d.tests = []testDoc{t}
	x := &Plan{d: d, file: p.file}
	if errs := x.build(); len(errs) > 0 {
		return nil, fmt.Errorf("plan: quick variant of %s: %w", p.Name, errs)
	}
	return x.cells, nil
}

func overlaps(keys []string, seen map[string]int) bool {
	for _, k := range keys {
		if _, ok := seen[k]; ok {
			return true
		}
	}
	return false
}

// pruneParams drops parameter values all of whose cells are already seen;
// it returns nil when the entry still repeats cells (drop it whole).
func pruneParams(d doc, p *Plan, t testDoc, seen map[string]int) []paramVals {
	cells, err := entryCells(d, p, t)
	if err != nil {
		return nil
	}
	params := append([]paramVals(nil), t.params...)
	for i := range params {
		pv := &params[i]
		if len(pv.values) < 2 {
			continue
		}
		var kept []string
		for _, v := range pv.values {
			allSeen := true
			for _, c := range cells {
				if fv, _ := c.Factor(pv.name); fv == v {
					if _, ok := seen[c.Key]; !ok {
						allSeen = false
					}
				}
			}
			if !allSeen {
				kept = append(kept, v)
			}
		}
		pv.values = kept
		if len(kept) == 0 {
			return nil
		}
	}
	t.params = params
	keys, err := entryKeys(d, p, t)
	if err != nil || overlaps(keys, seen) {
		return nil
	}
	return params
}

// clone deep-copies a doc so that Quick can change it.
func (d doc) clone() doc {
	c := d
	c.protocols = append([]string(nil), d.protocols...)
	c.clients = append([]string(nil), d.clients...)
	c.servers = append([]string(nil), d.servers...)
	c.ccs = append([]string(nil), d.ccs...)
	c.scenarios = make([]scenDoc, len(d.scenarios))
	for i, s := range d.scenarios {
		if s.grid != nil {
			g := make([]gridDim, len(s.grid))
			for k, dim := range s.grid {
				dim.values = append([]string(nil), dim.values...)
				dim.valAt = append([]pos(nil), dim.valAt...)
				g[k] = dim
			}
			s.grid = g
		}
		c.scenarios[i] = s
	}
	c.tests = make([]testDoc, len(d.tests))
	for i, t := range d.tests {
		t.protocols = cloneStrings(t.protocols)
		t.clients = cloneStrings(t.clients)
		t.servers = cloneStrings(t.servers)
		t.scenarios = cloneStrings(t.scenarios)
		t.scenAt = append([]pos(nil), t.scenAt...)
		ps := make([]paramVals, len(t.params))
		for k, pv := range t.params {
			pv.values = append([]string(nil), pv.values...)
			ps[k] = pv
		}
		t.params = ps
		c.tests[i] = t
	}
	return c
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}
