package report

import (
	"errors"
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/stats"
)

// runLabels name the two sides of a comparison of runs.
const (
	labelA = "A"
	labelB = "B"
)

// cellMatch is a cell of run A and the same cell of run B, compared: the
// stats.Comparison's A side is run B's cell ("B faster" reads as a change
// from A to B).
type cellMatch struct {
	a, b  *stats.CellStats
	loose bool // matched ignoring the congestion control
	cmp   *stats.Comparison
}

// pairMatch is a protocol comparison (e.g. h3 vs h2 in one configuration)
// present in both runs.
type pairMatch struct {
	a, b *stats.Comparison
}

type runDiff struct {
	anA, anB     *stats.Analysis
	matches      []*cellMatch
	onlyA, onlyB []string
	pairs        []pairMatch
	loose        int
}

// looseKey identifies a cell without its congestion control, so that a run
// with cubic can be compared with a run with bbr.
func looseKey(c *model.Cell) string {
	var b strings.Builder
	b.WriteString(c.Scenario + "\x00" + c.Test + "\x00")
	for _, f := range c.Factors {
		b.WriteString(f.Name + "=" + f.Value + "\x00")
	}
	b.WriteString(c.Protocol + "\x00" + c.Client)
	return b.String()
}

func diffRuns(a, b *model.Dataset, opts Options) (*runDiff, Options, error) {
	if a == nil || b == nil {
		return nil, opts, errors.New("report: nil dataset")
	}
	opts = opts.withDefaults(a)
	anA, err := stats.Analyze(a, opts.Stats)
	if err != nil {
		return nil, opts, fmt.Errorf("report: run A: %w", err)
	}
	anB, err := stats.Analyze(b, opts.Stats)
	if err != nil {
		return nil, opts, fmt.Errorf("report: run B: %w", err)
	}
	d := &runDiff{anA: anA, anB: anB}
	byKey := map[string]*stats.CellStats{}
	for _, cs := range anB.Cells {
		byKey[cs.Cell.Key] = cs
	}
	used := map[*stats.CellStats]bool{}
	var pending []*stats.CellStats
	pairOf := map[*stats.CellStats]*stats.CellStats{}
	for _, cs := range anA.Cells {
		if m, ok := byKey[cs.Cell.Key]; ok {
			pairOf[cs] = m
			used[m] = true
		} else {
			pending = append(pending, cs)
		}
	}
	// second pass: same cell except for the congestion control, when unique
	loose := func(cells []*stats.CellStats, skip map[*stats.CellStats]bool) map[string][]*stats.CellStats {
		m := map[string][]*stats.CellStats{}
		for _, cs := range cells {
			if !skip[cs] {
				m[looseKey(cs.Cell)] = append(m[looseKey(cs.Cell)], cs)
			}
		}
		return m
	}
	restB := loose(anB.Cells, used)
	restA := loose(pending, nil)
	looseMatched := map[*stats.CellStats]bool{}
	for _, cs := range pending {
		k := looseKey(cs.Cell)
		if len(restA[k]) == 1 && len(restB[k]) == 1 {
			pairOf[cs] = restB[k][0]
			used[restB[k][0]] = true
			looseMatched[cs] = true
		}
	}
	var cross []*stats.Comparison
	for _, cs := range anA.Cells {
		m, ok := pairOf[cs]
		if !ok {
			d.onlyA = append(d.onlyA, cs.Cell.Key)
			continue
		}
		cm := &cellMatch{a: cs, b: m, loose: looseMatched[cs], cmp: stats.Compare(m, cs, anA.Config)}
		if cm.loose {
			d.loose++
		}
		d.matches = append(d.matches, cm)
		cross = append(cross, cm.cmp)
	}
	for _, cs := range anB.Cells {
		if !used[cs] {
			d.onlyB = append(d.onlyB, cs.Cell.Key)
		}
	}
	stats.AdjustFamily(cross, "matched cells", anA.Config.Alpha)
	type cellPair struct{ x, y *stats.CellStats }
	inB := map[cellPair]*stats.Comparison{}
	for _, c := range anB.Comparisons {
		inB[cellPair{c.A, c.B}] = c
	}
	for _, c := range anA.Comparisons {
		x, okx := pairOf[c.A]
		y, oky := pairOf[c.B]
		if !okx || !oky {
			continue
		}
		if cb, ok := inB[cellPair{x, y}]; ok {
			d.pairs = append(d.pairs, pairMatch{a: c, b: cb})
		}
	}
	return d, opts, nil
}

func crossText(c *stats.Comparison) string {
	s := c.HeadlineAs(labelB, labelA)
	for i, n := range c.Notes() {
		if i == 0 && c.Verdict == stats.Insufficient && c.Needed > 0 {
			s += " (" + n + ")"
			continue
		}
		s += "; " + n
	}
	return s
}

func crossClass(c *stats.Comparison) string {
	switch c.Verdict {
	case stats.ABetter:
		return "b"
	case stats.BBetter:
		return "a"
	case stats.Insufficient:
		return "few"
	case stats.Negligible:
		return "neg"
	}
	return "ns"
}

// RunNotes is what the store keeps about a run outside its dataset. A
// comparison takes one per run; Options.Browser and Options.RunWarnings,
// which describe the single run of a report, are not used by it.
type RunNotes struct {
	Browser  string   // the browser of the run's chromium samples (store.DB.RunBrowser); "" for none
	Warnings []string // validity warnings about the whole run (store.DB.RunWarnings)
}

func runLine(label, source string, r model.Run, n RunNotes) string {
	s := fmt.Sprintf("%s: run %d of plan %s (%s, seed %d)", label, r.ID, orDash(r.PlanName), orDash(r.Status), r.Seed)
	if source != "" {
		s += " from " + source
	}
	if n.Browser != "" {
		s += ", browser " + n.Browser
	}
	return s
}

// CompareText writes the comparison of two runs as aligned text: the runs
// with their run-level warnings, then every cell present in both (matched
// by key, or by key without the congestion control when that is unique)
// with its medians, change from A to B, Holm-adjusted p-value and verdict;
// then the protocol comparisons of both runs side by side.
func CompareText(w io.Writer, a, b *model.Dataset, opts Options, na, nb RunNotes) error {
	d, opts, err := diffRuns(a, b, opts)
	if err != nil {
		return err
	}
	ew := &errWriter{w: w}
	fmt.Fprintln(ew, termSafe(runLine(labelA, opts.Source, a.Run, na)))
	fmt.Fprintln(ew, termSafe(runLine(labelB, opts.SourceB, b.Run, nb)))
	for _, side := range []struct {
		label string
		n     RunNotes
	}{{labelA, na}, {labelB, nb}} {
		for _, msg := range side.n.Warnings {
			fmt.Fprintf(ew, "%s: warning about the whole run: %s\n", side.label, termSafe(msg))
		}
	}
	fmt.Fprintf(ew, "Matched %d cells (%d ignoring congestion control); only in A: %d; only in B: %d. Verdict: signed-rank test where the runs' samples pair by iteration and seed, Mann-Whitney U otherwise, Holm over the %d matched cells, alpha %g.\n\n",
		len(d.matches), d.loose, len(d.onlyA), len(d.onlyB), len(d.matches), d.anA.Config.Alpha)
	rows := [][]string{{"TEST", "CONFIGURATION", "PROTOCOL", "MEDIAN A", "MEDIAN B", "CHANGE", "P(HOLM)", "DECIDED BY", "VERDICT"}}
	for _, m := range d.matches {
		c := m.a.Cell
		proto := c.Protocol
		if m.loose {
			proto += " (" + m.a.Cell.CC + " -> " + m.b.Cell.CC + ")"
		}
		rows = append(rows, []string{termSafe(c.Test), termSafe(cellLabel(c)), termSafe(proto),
			num(m.a.Summary.Median), num(m.b.Summary.Median), pct(m.cmp.RelDiff), stats.FormatP(m.cmp.P), m.cmp.Test.Label(), crossText(m.cmp)})
	}
	table(ew, rows)
	if len(d.pairs) > 0 {
		fmt.Fprintln(ew, "\nProtocol comparisons in both runs:")
		rows = [][]string{{"TEST", "CONFIGURATION", "COMPARISON", "A: DIFF", "A: VERDICT", "B: DIFF", "B: VERDICT", "CHANGED"}}
		for _, p := range d.pairs {
			changed := "no"
			if p.a.Verdict != p.b.Verdict {
				changed = "yes"
			}
			c := p.a.A.Cell
			rows = append(rows, []string{termSafe(c.Test), termSafe(cellLabel(c)), termSafe(pairName(p.a)),
				pct(p.a.RelDiff), termSafe(p.a.Text()), pct(p.b.RelDiff), termSafe(p.b.Text()), changed})
		}
		table(ew, rows)
	}
	for _, k := range d.onlyA {
		fmt.Fprintf(ew, "only in A: %s\n", termSafe(k))
	}
	for _, k := range d.onlyB {
		fmt.Fprintf(ew, "only in B: %s\n", termSafe(k))
	}
	return ew.err
}

// cellLabel is the configuration of a cell: scenario and factors.
func cellLabel(c *model.Cell) string {
	g := &stats.Group{Scenario: c.Scenario, Factors: c.Factors}
	return g.Label()
}

type compareRow struct {
	Test, Group, Proto    string
	MedA, MedACI          string
	MedB, MedBCI          string
	NA, NB                int
	Change, Paired, P     string
	Method, MinP          string
	Cliff, Verdict, Class string
	Loose                 bool
	RetrA, RetrB          string
	RTTA, RTTB            string
}

type pairRow struct {
	Test, Group, Pair      string
	RelA, VerdictA, ClassA string
	RelB, VerdictB, ClassB string
	Changed                bool
}

type compareTest struct {
	Name, Anchor string
	Bars         []chart
	Rows         []compareRow
}

type comparePage struct {
	Title        string
	CSS          template.CSS
	Runs         []runRow
	Matched      int
	Loose        int
	BFaster      int
	AFaster      int
	NS, Few, Neg int
	Band         string // the smallest effect of interest, "±5%"
	Rule         string
	Legend       []swatchView
	Pairs        []pairRow
	Changed      int
	Significant  []compareRow // cells whose change is significant
	Tests        []compareTest
	OnlyA, OnlyB []string
}

type runRow struct {
	K, A, B string
	Differs bool
}

// CompareHTML writes the comparison of two runs (for example before and
// after a stack upgrade, or cubic against bbr) as one self-contained HTML
// document: how the runs differ (with their browsers, per-sample overheads
// and run-level warnings), each matched cell's change from A to B with its
// significance, bar charts of both runs, and the protocol verdicts of both
// runs side by side.
func CompareHTML(w io.Writer, a, b *model.Dataset, opts Options, na, nb RunNotes) error {
	d, opts, err := diffRuns(a, b, opts)
	if err != nil {
		return err
	}
	title := opts.Title
	if title == "" {
		title = fmt.Sprintf("quicbench comparison: %s run %d (A) vs %s run %d (B)", orDash(a.Run.PlanName), a.Run.ID, orDash(b.Run.PlanName), b.Run.ID)
	}
	pg := &comparePage{Title: title, CSS: styleCSS, Matched: len(d.matches), Loose: d.loose, OnlyA: d.onlyA, OnlyB: d.onlyB}
	pg.Legend = []swatchView{{Name: "A", Color: template.CSS("background:" + categorical[0])}, {Name: "B", Color: template.CSS("background:" + categorical[1])}}
	pg.Rule = fmt.Sprintf("Each cell of run B is compared with the same cell of run A: two-sided Wilcoxon signed-rank test of the paired differences where the runs' samples pair (same iteration and emulator seed, which needs the same run seed), otherwise the two-sided Mann-Whitney U test; p-values Holm-corrected over the %d matched cells, significant below α = %g; “too few samples” where the design cannot reach α after the correction.",
		len(d.matches), d.anA.Config.Alpha)
	pair := func(k, va, vb string) {
		pg.Runs = append(pg.Runs, runRow{K: k, A: va, B: vb, Differs: va != vb})
	}
	rowsEnv := func(k string, f func(model.Run) string) { pair(k, f(a.Run), f(b.Run)) }
	pair("source", orDash(opts.Source), orDash(opts.SourceB))
	rowsEnv("run", func(r model.Run) string { return fmt.Sprintf("%d (%s)", r.ID, orDash(r.Status)) })
	rowsEnv("plan", func(r model.Run) string { return orDash(r.PlanName) })
	rowsEnv("plan hash", func(r model.Run) string { return orDash(r.PlanHash) })
	rowsEnv("started", func(r model.Run) string { return fmtTime(r.Started) })
	rowsEnv("seed", func(r model.Run) string { return fmt.Sprint(r.Seed) })
	rowsEnv("quicbench", func(r model.Run) string { return strings.TrimSpace(orDash(r.Env.Version) + " " + r.Env.Commit) })
	rowsEnv("Go", func(r model.Run) string { return orDash(r.Env.GoVersion) })
	rowsEnv("quic-go", func(r model.Run) string { return orDash(r.Env.QuicGoVersion) })
	rowsEnv("kernel", func(r model.Run) string { return orDash(r.Env.Kernel) })
	rowsEnv("CPU", func(r model.Run) string { return fmt.Sprintf("%s × %d", orDash(r.Env.CPUModel), r.Env.CPUs) })
	rowsEnv("TCP congestion control", func(r model.Run) string { return orDash(r.Env.CCClient) + " / " + orDash(r.Env.CCServer) })
	if na.Browser != "" || nb.Browser != "" {
		pair("browsers", orDash(na.Browser), orDash(nb.Browser))
	}
	// per-sample overhead per client (stats.ClientOverhead), summarised
	// once per run: the total, then the parts either run recorded
	overheads := func(ds *model.Dataset) map[string]stats.ClientOverhead {
		m := map[string]stats.ClientOverhead{}
		for _, o := range stats.DatasetOverheads(ds) {
			m[o.Client] = o
		}
		return m
	}
	show := func(ok bool, s stats.Spread) string {
		if !ok {
			return "–"
		}
		return s.String()
	}
	oa, ob := overheads(a), overheads(b)
	for _, c := range peers.Clients() {
		ca, okA := oa[c]
		cb, okB := ob[c]
		if !okA && !okB {
			continue
		}
		pair("per-sample overhead, "+clientName(c)+" (p50 / p95 / max)", show(okA, ca.Total), show(okB, cb.Total))
		// A run that recorded neither part (an older quicbench's) has no
		// breakdown: "–" rather than zeros.
		splitA := okA && (ca.Drain.Max > 0 || ca.Prep.Max > 0)
		splitB := okB && (cb.Drain.Max > 0 || cb.Prep.Max > 0)
		drain := (okA && ca.Drain.Max > 0) || (okB && cb.Drain.Max > 0)
		prep := (okA && ca.Prep.Max > 0) || (okB && cb.Prep.Max > 0)
		for _, p := range stats.OverheadParts(c, drain, prep) {
			pair("  of which "+p.Label, show(splitA, p.Of(ca)), show(splitB, p.Of(cb)))
		}
	}
	if len(na.Warnings) > 0 || len(nb.Warnings) > 0 {
		warns := func(ws []string) string { return orDash(strings.Join(ws, "; ")) }
		pair("warnings about the whole run", warns(na.Warnings), warns(nb.Warnings))
	}

	for _, p := range d.pairs {
		pr := pairRow{Test: p.a.A.Cell.Test, Group: cellLabel(p.a.A.Cell), Pair: pairName(p.a),
			RelA: pct(p.a.RelDiff), VerdictA: p.a.Text(), ClassA: verdictClass(p.a),
			RelB: pct(p.b.RelDiff), VerdictB: p.b.Text(), ClassB: verdictClass(p.b), Changed: p.a.Verdict != p.b.Verdict}
		if pr.Changed {
			pg.Changed++
		}
		pg.Pairs = append(pg.Pairs, pr)
	}
	byTest := map[string]*compareTest{}
	var order []string
	metrics := map[string]map[string]bool{}
	for _, m := range d.matches {
		if metrics[m.a.Cell.Test] == nil {
			metrics[m.a.Cell.Test] = map[string]bool{}
		}
		metrics[m.a.Cell.Test][m.a.Cell.Metric] = true
	}
	testOf := func(c *model.Cell) string {
		if len(metrics[c.Test]) > 1 {
			return c.Test + " · " + c.Metric
		}
		return c.Test
	}
	for _, m := range d.matches {
		switch m.cmp.Verdict {
		case stats.ABetter:
			pg.BFaster++
		case stats.BBetter:
			pg.AFaster++
		case stats.NoDifference:
			pg.NS++
		case stats.Negligible:
			pg.Neg++
			pg.Band = stats.BandText(m.cmp.MinEffect)
		default:
			pg.Few++
		}
		c := m.a.Cell
		name := testOf(c)
		t, ok := byTest[name]
		if !ok {
			t = &compareTest{Name: name, Anchor: anchor("test-", name)}
			byTest[name] = t
			order = append(order, name)
		}
		paired := "unpaired"
		if m.cmp.Pairs > 0 {
			paired = fmt.Sprintf("%s %s (%d pairs)", signed(m.cmp.PairedDiff), interval(m.cmp.PairedDiffCI), m.cmp.Pairs)
		}
		row := compareRow{Test: c.Test, Group: cellLabel(c), Proto: c.Protocol,
			MedA: num(m.a.Summary.Median), MedACI: interval(m.a.Summary.MedianCI), NA: m.a.Summary.N,
			MedB: num(m.b.Summary.Median), MedBCI: interval(m.b.Summary.MedianCI), NB: m.b.Summary.N,
			Change: pct(m.cmp.RelDiff), Paired: paired, P: stats.FormatP(m.cmp.P), Method: m.cmp.Test.Label(), MinP: stats.FormatP(m.cmp.MinP), Cliff: cliff(m.cmp.Cliff, m.cmp.Magnitude),
			Verdict: crossText(m.cmp), Class: crossClass(m.cmp), Loose: m.loose,
			RetrA: count(m.a.Transport.Retransmits), RetrB: count(m.b.Transport.Retransmits),
			RTTA: num(m.a.Transport.SmoothedRTTms), RTTB: num(m.b.Transport.SmoothedRTTms)}
		t.Rows = append(t.Rows, row)
		if v := m.cmp.Verdict; v == stats.ABetter || v == stats.BBetter {
			pg.Significant = append(pg.Significant, row)
		}
	}
	for _, name := range order {
		t := byTest[name]
		var ms []*cellMatch
		for _, m := range d.matches {
			if testOf(m.a.Cell) == name {
				ms = append(ms, m)
			}
		}
		const per = 8
		for start := 0; start < len(ms); start += per {
			part := ms[start:min(start+per, len(ms))]
			cats := make([]string, len(part))
			series := []barSeries{
				{name: labelA, color: hexColor(categorical[0]), mean: nans(len(part)), lo: nans(len(part)), hi: nans(len(part)), median: nans(len(part))},
				{name: labelB, color: hexColor(categorical[1]), mean: nans(len(part)), lo: nans(len(part)), hi: nans(len(part)), median: nans(len(part))},
			}
			for i, m := range part {
				cats[i] = multiline(cellLabel(m.a.Cell)) + "\n" + m.a.Cell.Protocol
				for k, cs := range []*stats.CellStats{m.a, m.b} {
					if cs.Summary.N > 0 {
						series[k].mean[i], series[k].median[i] = cs.Summary.Mean, cs.Summary.Median
						series[k].lo[i], series[k].hi[i] = cs.Summary.MeanCI.Lo, cs.Summary.MeanCI.Hi
					}
				}
			}
			title := "Mean with 95% CI and median, run A and run B"
			if len(ms) > per {
				title += fmt.Sprintf(" (cells %d–%d of %d)", start+1, start+len(part), len(ms))
			}
			t.Bars = append(t.Bars, barChart(title, "", cats, series, axisLabel(part[0].a.Cell)))
		}
		pg.Tests = append(pg.Tests, *t)
	}
	if err := compareTmpl.ExecuteTemplate(w, "compare", pg); err != nil {
		return fmt.Errorf("report: writing HTML: %w", err)
	}
	return nil
}

// termSafe replaces control characters (escape sequences, tabs, newlines)
// in text from plans and samples before it reaches a terminal.
func termSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
