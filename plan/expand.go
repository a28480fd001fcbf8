package plan

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// protoUnsupported says why a test cannot run over a protocol ("" if it can).
func protoUnsupported(t *testDef, p string) string {
	if (p == model.ProtoTCP || p == model.ProtoQUIC) && !t.raw {
		return fmt.Sprintf("the raw %s transport takes part only in download, upload, latency and ttfb tests, not %s", p, t.name)
	}
	return ""
}

// clientUnsupported says why a test cannot run with a client ("" if it can),
// from the client's description in the registry of stacks.
func clientUnsupported(t *testDef, c string) string {
	st, ok := peers.ClientStack(c)
	if !ok {
		return fmt.Sprintf("unknown client %q", c)
	}
	switch st.Client.Kind {
	case peers.KindBrowser, peers.KindAudit:
		return browserTestUnsupported(t, c)
	case peers.KindFetch, peers.KindCommand:
		if !slices.Contains(st.Client.Tests, t.name) {
			return fmt.Sprintf("the %s client runs only %s tests, not %s", c, peers.List(st.Client.Tests), t.name)
		}
	}
	return ""
}

// clientProtoUnsupported says why a client cannot use a protocol ("" if
// it can).
func clientProtoUnsupported(p, client string) string {
	st, ok := peers.ClientStack(client)
	if !ok || slices.Contains(st.Client.Protocols, p) {
		return ""
	}
	return fmt.Sprintf("the %s client speaks only %s, not %s", client, peers.List(st.Client.Protocols), p)
}

// connectionUnsupported says why a client cannot take a page or site
// sample with a connection kind.
func connectionUnsupported(conn, client string) string {
	if conn != ConnWarm {
		return ""
	}
	if st, ok := peers.ClientStack(client); ok && st.Client.ColdOnly != "" {
		return fmt.Sprintf("the %s client measures cold loads only (%s)", client, st.Client.ColdOnly)
	}
	return ""
}

// modeUnsupported says why a handshake mode cannot be measured over a protocol.
func modeUnsupported(mode, p string) string {
	switch {
	case mode == ModeZeroRTT && p != model.ProtoH3:
		return fmt.Sprintf("0-RTT is measured over h3 only (Go's TLS over TCP sends no early data), not %s", p)
	case mode == ModeResumed && p == model.ProtoH1C:
		return "h1c has no TLS session to resume"
	}
	return ""
}

type expander struct {
	p        *Plan
	file     string
	errs     ErrorList
	notes    []string
	noteSeen map[string]bool
	blocks   [][]int // scenario entry -> indices of its points
}

func (e *expander) failAt(at pos, path, value, msg string) {
	e.errs = append(e.errs, &Error{File: e.file, Line: at.line, Col: at.col, Path: path, Value: value, Msg: msg})
}

func (e *expander) note(s string) {
	if e.noteSeen == nil {
		e.noteSeen = map[string]bool{}
	}
	if !e.noteSeen[s] {
		e.noteSeen[s] = true
		e.notes = append(e.notes, s)
	}
}

func (e *expander) run() {
	e.scenarios()
	if len(e.errs) > 0 {
		return
	}
	e.cells()
	if len(e.errs) > 0 {
		return
	}
	e.p.notes = e.notes
}

// canon validates a link spec written in the plan; at is where its text starts.
func (e *expander) canon(text string, at pos, path string) (string, bool) {
	c, se := linkCanon(text)
	if se == nil {
		return c, true
	}
	if se.pos >= 0 && at.line > 0 && !strings.Contains(text, "\n") {
		at.col += se.pos
	}
	e.failAt(at, path, text, specMsg(se))
	return "", false
}

func specMsg(se *specErr) string {
	if se.token != "" && !strings.Contains(se.msg, se.token) {
		return fmt.Sprintf("at %q: %s", se.token, se.msg)
	}
	return se.msg
}

func (e *expander) scenarios() {
	d := &e.p.d
	var pts []Scenario
	byName := map[string]int{}
	e.blocks = make([][]int, len(d.scenarios))
	total := 0
	for i := range d.scenarios {
		s := &d.scenarios[i]
		path := fmt.Sprintf("scenarios[%d]", i)
		var news []Scenario
		if !s.isGrid() {
			sc, ok := e.named(s, path)
			if !ok {
				continue
			}
			news = []Scenario{sc}
		} else {
			n := 1
			for _, g := range s.grid {
				n *= len(g.values)
				if n > MaxScenarios {
					break
				}
			}
			if total+n > MaxScenarios {
				e.failAt(s.gridPos, path+".grid", "", fmt.Sprintf("the plan's grids expand to more than %d scenarios", MaxScenarios))
				return
			}
			var ok bool
			news, ok = e.gridPoints(s, path)
			if !ok {
				continue
			}
		}
		competingFactor(s, news) // plan/competing.go
		total += len(news)
		for _, sc := range news {
			if j, dup := byName[sc.Name]; dup {
				hint := "give each scenario its own name"
				if s.isGrid() {
					hint = "name the grid (name: ...) or add the dimension that tells them apart to the grid"
				}
				e.failAt(s.at, path, sc.Name, fmt.Sprintf("scenario name used twice (also scenarios[%d]); %s", e.entryOf(j), hint))
				continue
			}
			byName[sc.Name] = len(pts)
			e.blocks[i] = append(e.blocks[i], len(pts))
			pts = append(pts, sc)
		}
	}
	e.p.points = pts
}

// entryOf returns the scenario entry index of point j.
func (e *expander) entryOf(j int) int {
	for i, b := range e.blocks {
		for _, k := range b {
			if k == j {
				return i
			}
		}
	}
	return -1
}

func (e *expander) named(s *scenDoc, path string) (Scenario, bool) {
	sc := Scenario{Name: s.name}
	var upText, downText string
	ok := true
	if s.link != nil {
		if _, good := e.canon(*s.link, s.linkPos, path+".link"); !good {
			ok = false
		}
		upText, downText = *s.link, *s.link
	}
	if s.up != nil {
		if _, good := e.canon(*s.up, s.upPos, path+".up"); !good {
			ok = false
		}
		upText = *s.up
	}
	if s.down != nil {
		if _, good := e.canon(*s.down, s.dnP, path+".down"); !good {
			ok = false
		}
		downText = *s.down
	}
	if !ok {
		return sc, false
	}
	if s.traceUp != "" {
		upText = strings.TrimSpace("trace " + specPath(s.traceUp) + " " + upText)
	}
	if s.traceDown != "" {
		downText = strings.TrimSpace("trace " + specPath(s.traceDown) + " " + downText)
	}
	var good bool
	if sc.Up, good = e.canon(upText, s.at, path+" (up)"); !good {
		return sc, false
	}
	if sc.Down, good = e.canon(downText, s.at, path+" (down)"); !good {
		return sc, false
	}
	return sc, true
}

// isZero reports whether a grid value is a zero amount ("0", "0%", "0ms"),
// which adds no impairment and is left out of the link spec.
func isZero(v string) bool {
	i := 0
	for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
		i++
	}
	f, err := strconv.ParseFloat(v[:i], 64)
	return err == nil && f == 0
}

// fragment is a minimal link spec that checks one grid value on its own.
func fragment(dim, v string) string {
	switch dim {
	case "jitter":
		return "delay 1s " + v
	case "reorder":
		return "delay 10ms reorder " + v
	}
	for _, g := range gridDims {
		if g.name == dim {
			return g.keyword + " " + v
		}
	}
	return dim + " " + v
}

// pointSpec builds the link spec of one grid point: the base spec followed
// by one clause per dimension in canonical order (zero amounts left out).
func pointSpec(base string, coords map[string]string) string {
	parts := []string{}
	if b := strings.TrimSpace(base); b != "" {
		parts = append(parts, b)
	}
	for _, g := range gridDims {
		v, ok := coords[g.name]
		switch g.name {
		case "jitter":
			continue
		case "delay":
			j, hasJ := coords["jitter"]
			if !ok {
				v = "0ms"
			}
			if !ok && !hasJ {
				continue
			}
			if hasJ && !isZero(j) {
				parts = append(parts, "delay "+v+" "+j)
			} else if !isZero(v) {
				parts = append(parts, "delay "+v)
			}
			continue
		}
		if !ok {
			continue
		}
		if isZero(v) && g.name != "rate" && g.name != "limit" {
			continue
		}
		parts = append(parts, g.keyword+" "+v)
	}
	return strings.Join(parts, " ")
}

func (e *expander) gridPoints(s *scenDoc, path string) ([]Scenario, bool) {
	ok := true
	if s.base != "" {
		if _, good := e.canon(s.base, s.basePos, path+".base"); !good {
			ok = false
		}
	}
	baseWords := strings.Fields(s.base)
	_, hasDelay := dimIndex(s.grid, "delay")
	for _, g := range s.grid {
		kw := fragment(g.name, "")
		kw = strings.Fields(kw)[0]
		if contains(baseWords, kw) {
			msg := fmt.Sprintf("the base spec already sets %s: set it in the base or in the grid, not both", kw)
			if g.name == "jitter" && !hasDelay {
				msg = "jitter adds to the delay clause, which the base spec sets: move the delay into the grid (delay: [...])"
			}
			e.failAt(g.at, path+".grid."+g.name, "", msg)
			ok = false
			continue
		}
		for i, v := range g.values {
			if _, se := linkCanon(fragment(g.name, v)); se != nil {
				e.failAt(g.valAt[i], fmt.Sprintf("%s.grid.%s[%d]", path, g.name, i), v, fmt.Sprintf("not a valid %s value: %s", g.name, specMsg(se)))
				ok = false
			}
		}
	}
	if !ok {
		return nil, false
	}
	var out []Scenario
	idx := make([]int, len(s.grid))
	for {
		coords := map[string]string{}
		var names []string
		var factors []model.Factor
		for k, g := range s.grid {
			v := g.values[idx[k]]
			coords[g.name] = v
			names = append(names, g.name+"="+v)
			factors = append(factors, model.Factor{Name: g.name, Value: v})
		}
		name := strings.Join(names, ",")
		if s.name != "" {
			name = s.name + ":" + name
		}
		text := pointSpec(s.base, coords)
		canon, good := e.canon(text, s.gridPos, path+".grid (point "+name+")")
		if !good {
			return nil, false
		}
		sc := Scenario{Name: name, Factors: factors}
		if s.direction != "down" {
			sc.Up = canon
		}
		if s.direction != "up" {
			sc.Down = canon
		}
		out = append(out, sc)
		// advance the odometer, last dimension fastest
		k := len(idx) - 1
		for k >= 0 {
			idx[k]++
			if idx[k] < len(s.grid[k].values) {
				break
			}
			idx[k] = 0
			k--
		}
		if k < 0 {
			return out, true
		}
	}
}

func dimIndex(g []gridDim, name string) (int, bool) {
	for i := range g {
		if g[i].name == name {
			return i, true
		}
	}
	return -1, false
}

// entryPlan is what one test entry expands over.
type entryPlan struct {
	t       *testDoc
	def     *testDef
	points  []int
	combos  [][]model.Factor // parameter combinations, first parameter slowest
	clients []string
	servers []string
	protos  map[string][][]string // stackKey(client, server) -> per combo -> protocols ([] when the server cannot serve any)
}

// stackKey is the entryPlan.protos key of a client and a server.
func stackKey(client, server string) string { return client + "\x00" + server }

func (e *expander) cells() {
	d := &e.p.d
	var plans []entryPlan
	total := 0
	for i := range d.tests {
		ep, ok := e.entry(&d.tests[i])
		if !ok {
			continue
		}
		n := 0
		for _, ps := range ep.protos {
			for _, p := range ps {
				n += len(p)
			}
		}
		n *= len(ep.points) * len(d.ccs)
		total += n
		if total > MaxCells {
			e.failAt(ep.t.at, fmt.Sprintf("tests[%d]", ep.t.index), "", fmt.Sprintf("the plan expands to more than %d cells; split it into several plans", MaxCells))
			return
		}
		plans = append(plans, ep)
	}
	if len(e.errs) > 0 {
		return
	}
	cells := make([]model.Cell, 0, total)
	timeouts := map[string]time.Duration{}
	minIters := map[string]int{}
	if d.precision > 0 && d.maxIterations == 0 {
		d.maxIterations = defaultMaxIterations(d)
	}
	owner := map[string]int{}
	reported := map[int]bool{}
	reportedMax := map[int]bool{}
	for pi := range e.p.points {
		sc := &e.p.points[pi]
		for _, ep := range plans {
			if !containsInt(ep.points, pi) {
				continue
			}
			t := ep.t
			iters, warm := d.iterations, d.warmup
			if t.iterations > 0 {
				iters = t.iterations
			}
			least := iters
			if d.precision > 0 {
				if iters > d.maxIterations && !reportedMax[t.index] {
					reportedMax[t.index] = true
					e.failAt(d.maxIterAt, "max_iterations", strconv.Itoa(d.maxIterations), fmt.Sprintf(
						"below the %d iterations of tests[%d] (%s), which an adaptive run takes at least", iters, t.index, t.test))
				}
				iters = d.maxIterations
			}
			if t.warmup != nil {
				warm = *t.warmup
			}
			for ci, combo := range ep.combos {
				var pv []string
				for _, f := range combo {
					pv = append(pv, f.Name+"="+f.Value)
				}
				prefix := sc.Name + "/" + t.test + "/" + strings.Join(pv, ",")
				for _, client := range ep.clients {
					for _, server := range ep.servers {
						for _, cc := range d.ccs {
							suffix := ""
							if server != model.ServerQuicbench {
								suffix = "/" + server
							}
							for _, proto := range ep.protos[stackKey(client, server)][ci] {
								metric, unit, higher := ep.def.primary(client)
								c := model.Cell{
									Key:            prefix + "/" + proto + "/" + client + "/" + cc + suffix,
									Group:          prefix + "/" + client + "/" + cc + suffix,
									Scenario:       sc.Name,
									LinkUp:         sc.Up,
									LinkDown:       sc.Down,
									Test:           t.test,
									Protocol:       proto,
									Client:         client,
									Server:         server,
									CC:             cc,
									Metric:         metric,
									Unit:           unit,
									HigherIsBetter: higher,
									Iterations:     iters,
									Warmup:         warm,
								}
								c.Factors = append(append([]model.Factor(nil), sc.Factors...), combo...)
								if j, dup := owner[c.Key]; dup {
									if !reported[t.index] {
										reported[t.index] = true
										e.failAt(t.at, fmt.Sprintf("tests[%d]", t.index), "", fmt.Sprintf(
											"measures cell %s again (already in tests[%d]); give the two entries different parameters, scenarios or protocols", c.Key, j))
									}
									continue
								}
								owner[c.Key] = t.index
								if t.timeout > 0 {
									timeouts[c.Key] = t.timeout
								}
								if d.precision > 0 {
									minIters[c.Key] = least
								}
								cells = append(cells, c)
							}
						}
					}
				}
			}
		}
	}
	if len(cells) == 0 && len(e.errs) == 0 {
		e.failAt(pos{}, "", "", "the plan expands to zero cells")
	}
	e.p.cells = cells
	e.p.timeouts = timeouts
	e.p.minIters = minIters
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// entry resolves what one test entry runs over, with notes for what the
// plan-level defaults offer but the test cannot run.
func (e *expander) entry(t *testDoc) (entryPlan, bool) {
	d := &e.p.d
	def := lookupTest(t.test)
	path := fmt.Sprintf("tests[%d]", t.index)
	label := fmt.Sprintf("%s (%s)", path, t.test)
	ep := entryPlan{t: t, def: def, protos: map[string][][]string{}}
	ok := true

	// scenarios
	if t.scenarios == nil {
		for i := range e.p.points {
			ep.points = append(ep.points, i)
		}
	} else {
		for k, name := range t.scenarios {
			found := false
			for bi, s := range d.scenarios {
				if s.name == name {
					ep.points = append(ep.points, e.blocks[bi]...)
					found = true
				}
			}
			for pi, sc := range e.p.points {
				if sc.Name == name && !found {
					ep.points = append(ep.points, pi)
					found = true
				}
			}
			if !found {
				e.failAt(t.scenAt[k], fmt.Sprintf("%s.scenarios[%d]", path, k), name, "no such scenario (allowed: "+e.scenarioNames()+")")
				ok = false
			}
		}
		sort.Ints(ep.points)
		ep.points = uniqInts(ep.points)
	}

	// parameter combinations
	var lists [][]model.Factor
	for _, pd := range def.params {
		var vals []string
		for _, pv := range t.params {
			if pv.name == pd.name {
				vals = pv.values
			}
		}
		if vals == nil {
			if pd.def == "" {
				e.failAt(t.at, path+".params."+pd.name, "", fmt.Sprintf("missing: %s needs a %s (allowed: %s)", t.test, pd.name, pd.allowed()))
				ok = false
				continue
			}
			vals = []string{pd.def}
		}
		var fs []model.Factor
		for _, v := range vals {
			fs = append(fs, model.Factor{Name: pd.name, Value: v})
		}
		lists = append(lists, fs)
	}
	if !ok {
		return ep, false
	}
	ep.combos = [][]model.Factor{nil}
	for _, l := range lists {
		var next [][]model.Factor
		for _, c := range ep.combos {
			for _, f := range l {
				next = append(next, append(append([]model.Factor(nil), c...), f))
			}
			if len(next) > MaxCells {
				e.failAt(t.at, path+".params", "", fmt.Sprintf("the parameters expand to more than %d combinations", MaxCells))
				return ep, false
			}
		}
		ep.combos = next
	}

	// clients
	if t.clients != nil {
		ep.clients = t.clients
	} else {
		var whys []string
		for _, c := range d.clients {
			if why := clientUnsupported(def, c); why != "" {
				e.note(fmt.Sprintf("%s: client %s skipped: %s", label, c, why))
				whys = append(whys, why)
				continue
			}
			ep.clients = append(ep.clients, c)
		}
		if len(ep.clients) == 0 {
			e.failAt(t.at, path, "", fmt.Sprintf("no client can run %s: %s; set client: builtin on this test",
				t.test, strings.Join(whys, "; ")))
			return ep, false
		}
	}

	for _, c := range ep.clients {
		if !e.clientTimeout(t, path, label, c) {
			return ep, false
		}
	}

	// servers
	if t.servers != nil {
		ep.servers = t.servers
	} else {
		for _, srv := range d.servers {
			if why := serverUnsupported(def, srv); why != "" {
				e.note(fmt.Sprintf("%s: server %s skipped: %s", label, srv, why))
				continue
			}
			ep.servers = append(ep.servers, srv)
		}
		if len(ep.servers) == 0 {
			e.failAt(t.at, path, "", fmt.Sprintf("no server can run %s: the plan's server is %s; set server: quicbench on this test",
				t.test, strings.Join(d.servers, ", ")))
			return ep, false
		}
	}

	// protocols per client, server and parameter combination
	for _, client := range ep.clients {
		var base, dropped []string
		if t.protocols != nil {
			base = t.protocols
		} else {
			for _, p := range d.protocols {
				if why := protoUnsupported(def, p); why != "" {
					e.note(fmt.Sprintf("%s: protocol %s skipped: %s", label, p, why))
					dropped = append(dropped, why)
					continue
				}
				base = append(base, p)
			}
		}
		if client != model.ClientBuiltin {
			var kept []string
			for _, p := range base {
				if why := clientProtoUnsupported(p, client); why != "" {
					e.note(fmt.Sprintf("%s: protocol %s skipped for client %s: %s", label, p, client, why))
					dropped = append(dropped, why)
					continue
				}
				kept = append(kept, p)
			}
			base = kept
		}
		for _, combo := range ep.combos {
			var ps []string
			reasons := append([]string(nil), dropped...)
			candidates := base
			if why := connectionUnsupported(factorValue(combo, "connection"), client); why != "" {
				candidates, reasons = nil, append(reasons, why)
			}
			if why := comboBrowserUnsupported(def, combo, client); why != "" {
				candidates, reasons = nil, append(reasons, why)
			}
			for _, p := range candidates {
				if mode := factorValue(combo, "mode"); mode != "" {
					if why := modeUnsupported(mode, p); why != "" {
						e.note(fmt.Sprintf("%s: protocol %s skipped for mode %s: %s", label, p, mode, why))
						reasons = append(reasons, why)
						continue
					}
				}
				ps = append(ps, p)
			}
			if len(ps) == 0 {
				var pv []string
				for _, f := range combo {
					pv = append(pv, f.Name+"="+f.Value)
				}
				e.failAt(t.at, path, "", fmt.Sprintf("no protocol can run %s %s with client %s: %s",
					t.test, strings.Join(pv, ","), client, strings.Join(reasons, "; ")))
				return ep, false
			}
			e.splitByServer(&ep, label, client, ps)
		}
	}
	return ep, true
}

// splitByServer adds the protocols ps of one client and parameter
// combination to ep.protos for each of ep's servers, keeping those the
// server serves. A server left with none gets an empty list (its cells
// are skipped, with a note); the entry fails only when no server is left
// with any, which the client's own checks already rule out for quicbench's
// server.
func (e *expander) splitByServer(ep *entryPlan, label, client string, ps []string) {
	for _, srv := range ep.servers {
		var kept []string
		cand := ps
		if why := benchServerUnsupported(ep.def, client, srv); why != "" {
			e.note(fmt.Sprintf("%s: server %s skipped for client %s: %s", label, srv, client, why))
			cand = nil
		}
		for _, p := range cand {
			if why := serverProtoUnsupported(p, srv); why != "" {
				e.note(fmt.Sprintf("%s: protocol %s skipped for server %s: %s", label, p, srv, why))
				continue
			}
			kept = append(kept, p)
		}
		k := stackKey(client, srv)
		ep.protos[k] = append(ep.protos[k], kept)
	}
}

// clientTimeout checks the timeout of a test entry against the shortest
// per-sample timeout its client works with (the registry's MinTimeout,
// Lighthouse's 41 s). A test's own timeout is reported where the test sets
// it, the plan's where the plan does (the default is long enough).
func (e *expander) clientTimeout(t *testDoc, path, label, client string) bool {
	st, ok := peers.ClientStack(client)
	if !ok || st.Client.MinTimeout == 0 {
		return true
	}
	min := time.Duration(st.Client.MinTimeout)
	timeout, set, where := e.p.d.timeout, e.p.d.timeoutAt, "timeout"
	if t.timeout > 0 {
		timeout, set, where = t.timeout, t.timeoutAt, path+".timeout"
	}
	if timeout >= min {
		return true
	}
	why := ""
	if st.Client.MinTimeoutWhy != "" {
		why = ": " + st.Client.MinTimeoutWhy
	}
	msg := fmt.Sprintf("the %s client needs a timeout of at least %s%s", client, formatDuration(min), why)
	if t.timeout == 0 {
		msg = fmt.Sprintf("%s runs the %s client, which needs a timeout of at least %s%s; raise the plan's timeout or give the test one of its own",
			label, client, formatDuration(min), why)
	}
	e.failAt(set.at, where, set.text, msg)
	return false
}

func factorValue(fs []model.Factor, name string) string {
	for _, f := range fs {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

func uniqInts(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func (e *expander) scenarioNames() string {
	var names []string
	for _, s := range e.p.d.scenarios {
		if s.name != "" {
			names = append(names, s.name)
		}
	}
	if len(names) == 0 {
		for i, s := range e.p.points {
			if i == 8 {
				names = append(names, "...")
				break
			}
			names = append(names, s.Name)
		}
	}
	return strings.Join(names, ", ")
}

// defaultMaxIterations is the most iterations of an adaptive plan that does
// not say: ten times the plan's iterations, and at least the largest
// iterations of a test.
func defaultMaxIterations(d *doc) int {
	n := min(MaxIterations, 10*d.iterations)
	for _, t := range d.tests {
		n = max(n, t.iterations)
	}
	return n
}
