package report

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/stats"
)

type resultRow struct {
	Group     string
	GroupSpan int
	Proto     string
	Swatch    swatchView
	N, Failed int
	Mean      string
	MeanCI    string
	Median    string
	MedianCI  string
	P5, P95   string
	P99       string
	Min, Max  string
	CV        string
	Delta     string
	Ref       bool
}

type transportRow struct {
	Group                     string
	GroupSpan                 int
	Proto                     string
	Conns, Retrans, Lost, PTO string
	SRTT, MinRTT, Cwnd, Drops string
	Queue, CPU                string
}

type cmpRow struct {
	ID                           string // the row's fragment identifier, which the figures link to
	Group, Pair, MedA, MedB, Rel string
	Effect                       string // Hodges-Lehmann estimate in % of B's median [95% CI]
	Paired, HL, PWelch, P, Cliff string
	Rule, Family, Method, MinP   string
	Band                         string // where the effect's interval lies against the band
	Verdict, Class               string
	Notes                        []string
	// CC states the congestion controls the two sides ran
	// (stats.Comparison.Controllers), CCDiffers when the algorithms differ.
	CC        string
	CCDiffers bool
	// EvidenceA and EvidenceB link the evidence files of each side's
	// samples (Options.Evidence), nil when they kept none.
	EvidenceA, EvidenceB []evidenceLink
	EvidenceCommand      string   // Options.EvidenceCommand
	Why                  []string // transport medians of A / B
	// Worst describes the variant with failures ranked worst ("" when the
	// failure rates do not differ): its test, p-value and verdict.
	Worst, WorstClass string
}

// why lists the transport medians of both sides of a comparison, the
// figures that usually explain a difference.
func why(c *stats.Comparison) []string {
	a, b := c.A.Transport, c.B.Transport
	var out []string
	add := func(name string, x, y float64, f func(float64) string, unit string) {
		if math.IsNaN(x) && math.IsNaN(y) {
			return
		}
		out = append(out, fmt.Sprintf("%s %s / %s%s", name, f(x), f(y), unit))
	}
	add("retrans", a.Retransmits, b.Retransmits, count, "")
	add("lost", a.PacketsLost, b.PacketsLost, count, "")
	add("sRTT", a.SmoothedRTTms, b.SmoothedRTTms, num, " ms")
	add("cwnd", a.CwndBytes/1024, b.CwndBytes/1024, num, " KiB")
	add("CPU", a.CPUms, b.CPUms, num, " ms")
	return out
}

type siteTable struct {
	Title  string
	Protos []string
	Rows   []siteRow
}

type siteRow struct {
	Name   string
	Values []string
}

// chartGroup is a set of small charts drawn side by side.
type chartGroup struct {
	Title  string
	Charts []chart
}

type testView struct {
	Name, Anchor, Metric string
	Legend               []swatchView // protocols of this test
	Groups, Cells        int
	Counted, Failed      int
	Tree                 *stats.Tree
	Heatmaps             []chart
	HeatNote             string
	Bars                 []chart
	BarsNote             string
	CDFs                 []chart
	SelectNote           string
	Rows                 []resultRow
	Transport            []transportRow
	HasTransport         bool
	Comparisons          []cmpRow
	Sites                []siteTable
	Clients              []clientTable
	Caveats              []string // the clients' caveats that apply to the test's cells (peers.Caveat)
	HOL                  []chartGroup
	Stream               []chartGroup
	CPU                  []chartGroup
	Waterfalls           []chartGroup
	// fairness and latency under load (report/fairness.go)
	Fairness []chartGroup
	Shares   []shareRow
	Load     []loadRow

	chosenFound bool
}

func buildTest(ds *model.Dataset, an *stats.Analysis, t *stats.TestSet, opts Options, ids map[*stats.Comparison]string) (*testView, error) {
	tv := &testView{Name: t.Name, Anchor: anchor("test-", t.Name), Groups: len(t.Groups), Tree: t.Tree}
	if len(t.Groups) == 0 {
		return tv, nil
	}
	first := t.Groups[0].Cells[0].Cell
	tv.Metric = metricDesc(first)
	for _, g := range t.Groups {
		tv.Cells += len(g.Cells)
		for _, cs := range g.Cells {
			tv.Counted += cs.Summary.N
			tv.Failed += len(cs.Failed)
		}
	}
	tv.Legend = swatches(testProtocols(t))
	tablesFor(tv, t, an.Config, ids, opts)
	heatmaps(tv, t, opts)
	bars(tv, t)
	sel := selectGroups(tv, t, opts.MaxGroupCharts)
	for _, g := range sel {
		tv.CDFs = append(tv.CDFs, groupCDF(g))
	}
	for _, g := range sel {
		if cg, ok := holCharts(g); ok {
			tv.HOL = append(tv.HOL, cg)
		}
		if cg, ok := streamCharts(g); ok {
			tv.Stream = append(tv.Stream, cg)
		}
		if cg, ok := cpuCharts(g); ok {
			tv.CPU = append(tv.CPU, cg)
		}
		if cg, ok := fairnessCharts(g); ok {
			tv.Fairness = append(tv.Fairness, cg)
		}
	}
	tv.Shares, tv.Load = shareRows(t), loadRows(t)
	if opts.WaterfallSample != 0 {
		for _, g := range t.Groups {
			for _, cs := range g.Cells {
				for _, s := range cs.Samples {
					if s.ID == opts.WaterfallSample && len(s.Resources) > 0 {
						tv.chosenFound = true
						tv.Waterfalls = append(tv.Waterfalls, chartGroup{
							Title:  fmt.Sprintf("Chosen sample %d: %s", s.ID, g.Label()),
							Charts: []chart{waterfallFor(cs, s, 0)},
						})
					}
				}
			}
		}
	}
	for _, g := range sel {
		if cg, ok := waterfallCharts(g); ok {
			tv.Waterfalls = append(tv.Waterfalls, cg)
		}
	}
	if t.Name == "page" || t.Name == "site" || hasResources(t) {
		for _, g := range t.Groups {
			tv.Sites = append(tv.Sites, siteTableOf(g))
		}
	}
	tv.Clients = clientTables(t)
	tv.Caveats = caveats(t)
	return tv, nil
}

// clientTable sets the built-in client's results next to a browser's
// for one configuration (scenario, parameters, congestion control) that
// both clients ran: per protocol, the two medians of the primary metric,
// their difference and their ratio.
type clientTable struct {
	Title  string
	Client string // the browser, for readers
	Unit   string
	Rows   []clientRow
}

type clientRow struct {
	Proto            string
	Builtin, Browser string // medians
	NBuiltin, NOther int
	Diff, Ratio      string // browser - built-in, browser / built-in
}

// clientTables pairs the groups of t that differ only by client.
func clientTables(t *stats.TestSet) []clientTable {
	type key struct{ scenario, factors, cc string }
	keyOf := func(g *stats.Group) key {
		var f []string
		for _, x := range g.Factors {
			f = append(f, x.Name+"="+x.Value)
		}
		return key{g.Scenario, strings.Join(f, ","), g.CC}
	}
	builtin := map[key]*stats.Group{}
	for _, g := range t.Groups {
		if g.Client == model.ClientBuiltin {
			builtin[keyOf(g)] = g
		}
	}
	var out []clientTable
	for _, g := range t.Groups {
		b, ok := builtin[keyOf(g)]
		if !peers.IsBrowser(g.Client) || !ok || g.Cells[0].Cell.Unit != b.Cells[0].Cell.Unit {
			continue
		}
		ct := clientTable{Title: b.Label(), Client: peers.ClientLabel(g.Client, ""), Unit: g.Cells[0].Cell.Unit}
		for _, cc := range g.Cells {
			for _, bc := range b.Cells {
				if bc.Cell.Protocol != cc.Cell.Protocol {
					continue
				}
				bm, cm := bc.Summary.Median, cc.Summary.Median
				ct.Rows = append(ct.Rows, clientRow{Proto: cc.Cell.Protocol,
					Builtin: num(bm), Browser: num(cm), NBuiltin: bc.Summary.N, NOther: cc.Summary.N,
					Diff: signed(cm - bm), Ratio: num(cm / bm)})
			}
		}
		if len(ct.Rows) > 0 {
			out = append(out, ct)
		}
	}
	return out
}

func hasResources(t *stats.TestSet) bool {
	for _, g := range t.Groups {
		for _, cs := range g.Cells {
			for _, s := range cs.Samples {
				if len(s.Resources) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// tablesFor fills the results (study C), transport and comparison tables.
func tablesFor(tv *testView, t *stats.TestSet, cfg stats.Config, ids map[*stats.Comparison]string, opts Options) {
	for _, g := range t.Groups {
		ref := refCell(g)
		for i, cs := range g.Cells {
			s := cs.Summary
			r := resultRow{Proto: cs.Cell.Protocol, Swatch: swatches([]string{cs.Cell.Protocol})[0], N: s.N, Failed: s.Failed,
				Mean: num(s.Mean), MeanCI: interval(s.MeanCI), Median: num(s.Median), MedianCI: interval(s.MedianCI),
				P5: num(s.P5), P95: num(s.P95), P99: num(s.P99), Min: num(s.Min), Max: num(s.Max), CV: pct(s.CV),
				Ref: cs == ref && len(g.Cells) > 1}
			r.CV = strings.TrimPrefix(r.CV, "+")
			if cs != ref {
				r.Delta = pct((s.Mean - ref.Summary.Mean) / math.Abs(ref.Summary.Mean))
			}
			if i == 0 {
				r.Group, r.GroupSpan = g.Label(), len(g.Cells)
			}
			tv.Rows = append(tv.Rows, r)

			tr := cs.Transport
			trow := transportRow{Proto: cs.Cell.Protocol, Conns: count(tr.Connections), Retrans: count(tr.Retransmits),
				Lost: count(tr.PacketsLost), PTO: count(tr.PTOs), SRTT: num(tr.SmoothedRTTms), MinRTT: num(tr.MinRTTms),
				Cwnd: num(tr.CwndBytes / 1024), Drops: count(tr.LinkDrops), Queue: num(tr.QueueDelayMs), CPU: num(tr.CPUms)}
			if i == 0 {
				trow.Group, trow.GroupSpan = g.Label(), len(g.Cells)
			}
			if !math.IsNaN(tr.Connections) || !math.IsNaN(tr.LinkDrops) || !math.IsNaN(tr.CPUms) {
				tv.HasTransport = true
			}
			tv.Transport = append(tv.Transport, trow)
		}
		for _, c := range g.Comparisons {
			paired := "unpaired"
			if c.Pairs > 0 {
				paired = fmt.Sprintf("%s %s (%d pairs)", signed(c.PairedDiff), interval(c.PairedDiffCI), c.Pairs)
			}
			hl := "–"
			if !math.IsNaN(c.HL) {
				hl = signed(c.HL) + " " + interval(c.HLCI)
			}
			cc := c.Controllers()
			tv.Comparisons = append(tv.Comparisons, cmpRow{ID: ids[c], Group: g.Label(), Pair: pairName(c),
				MedA: num(c.A.Summary.Median), MedB: num(c.B.Summary.Median), Rel: pct(c.RelDiff), Effect: effectText(c), Paired: paired, HL: hl,
				PWelch: stats.FormatP(c.PWelch), P: stats.FormatP(c.P), Cliff: cliff(c.Cliff, c.Magnitude), Rule: ruleText(c, cfg),
				Family: familyText(c), Method: c.Test.Label(), MinP: stats.FormatP(c.MinP), Band: bandText(c),
				Verdict: c.Headline(), Notes: c.Notes(), Class: verdictClass(c), Why: why(c), Worst: worstText(c), WorstClass: worstClass(c),
				CC: cc, CCDiffers: cc != "" && !c.MatchedCC(),
				EvidenceA: evidenceLinks(c.A, opts), EvidenceB: evidenceLinks(c.B, opts), EvidenceCommand: opts.EvidenceCommand})
		}
	}
}

// effectText is a comparison's Hodges-Lehmann effect in % of B's median
// with its interval, "+0.9% [+0.5%, +1.3%]"; the difference of the medians
// when the design is not paired.
func effectText(c *stats.Comparison) string {
	e, ci := effectOf(c)
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return "–"
	}
	if !ci.Valid() {
		if !math.IsNaN(c.Effect.Rel) {
			return shortPct(e) + " [–]"
		}
		return shortPct(e) + " (Δ median)"
	}
	return shortPct(e) + " [" + shortPct(ci.Lo) + ", " + shortPct(ci.Hi) + "]"
}

// bandText says where a comparison's interval lies against the smallest
// effect of interest: "inside ±5%", "crosses ±5%", "outside ±5%", "–".
func bandText(c *stats.Comparison) string {
	if c.MinEffect <= 0 || c.Effect.Class == stats.PracticalUnknown {
		return "–"
	}
	b := stats.BandText(c.MinEffect)
	switch c.Effect.Class {
	case stats.Inside:
		return "within " + b
	case stats.Crosses:
		return "reaches into " + b
	}
	return "wholly beyond " + b
}

// worstText describes the failures-ranked-worst variant of a comparison
// whose sides failed at different rates; "" otherwise.
func worstText(c *stats.Comparison) string {
	f := c.Failures
	if !f.Differs {
		return ""
	}
	return fmt.Sprintf("with failures as worst: %s (%s, p %s, min p %s)", c.WorstText(), f.Worst.Label(), stats.FormatP(f.WorstP), stats.FormatP(f.WorstMinP))
}

func signed(v float64) string {
	s := num(v)
	if v > 0 {
		return "+" + s
	}
	return s
}

// tickLabel is a group label for a chart axis: one line per part.
func tickLabel(g *stats.Group) string { return multiline(g.Label()) }

// multiline splits a " · "-separated label into at most three short lines.
func multiline(label string) string {
	parts := strings.Split(label, " · ")
	for i, p := range parts {
		parts[i] = truncate(p, 22)
	}
	if len(parts) > 3 {
		parts = append(parts[:2], strings.Join(parts[2:], " "))
	}
	return strings.Join(parts, "\n")
}

// bars draws study A's bar charts: per configuration and protocol, the mean
// with its 95% CI and the median, eight configurations per chart. When the
// values of the test's configurations span more than ten-fold, a shared
// axis would flatten the small ones to nothing: then each configuration
// gets a panel with its own axis (small multiples).
func bars(tv *testView, t *stats.TestSet) {
	protos := testProtocols(t)
	seriesFor := func(gs []*stats.Group) ([]string, []barSeries) {
		cats := make([]string, len(gs))
		series := make([]barSeries, len(protos))
		for k, p := range protos {
			series[k] = barSeries{name: p, color: protoColor(p), mean: nans(len(gs)), lo: nans(len(gs)), hi: nans(len(gs)), median: nans(len(gs))}
		}
		for i, g := range gs {
			cats[i] = tickLabel(g)
			for k, p := range protos {
				if cs := g.Cell(p); cs != nil && cs.Summary.N > 0 {
					s := cs.Summary
					series[k].mean[i], series[k].median[i] = s.Mean, s.Median
					series[k].lo[i], series[k].hi[i] = s.MeanCI.Lo, s.MeanCI.Hi
				}
			}
		}
		return cats, series
	}
	if len(t.Groups) > 1 {
		_, all := seriesFor(t.Groups)
		if lo, hi := barSpan(all); lo > 0 && hi/lo > 10 {
			for _, g := range t.Groups {
				cats, series := seriesFor([]*stats.Group{g})
				cats[0] = ""
				c := barChartW("", "", cats, series, axisLabel(g.Cells[0].Cell), vg.Points(float64(70+len(protos)*28)))
				c.Title = g.Label()
				tv.Bars = append(tv.Bars, c)
			}
			tv.BarsNote = fmt.Sprintf("The configurations' values span %.0f-fold: one panel per configuration, each with its own axis.", hi/lo)
			return
		}
	}
	const per = 8
	for start := 0; start < len(t.Groups); start += per {
		gs := t.Groups[start:min(start+per, len(t.Groups))]
		cats, series := seriesFor(gs)
		title := "Mean with 95% CI and median, per configuration and protocol"
		if len(t.Groups) > per {
			title += fmt.Sprintf(" (configurations %d–%d of %d)", start+1, start+len(gs), len(t.Groups))
		}
		tv.Bars = append(tv.Bars, barChart(title, "", cats, series, axisLabel(gs[0].Cells[0].Cell)))
	}
}

// barSpan returns the smallest and largest positive median or mean of the
// series (NaN skipped): the span a shared axis would have to show.
func barSpan(series []barSeries) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for i := range s.mean {
			for _, v := range []float64{s.mean[i], s.median[i]} {
				if v > 0 && !math.IsInf(v, 0) {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
	}
	if math.IsInf(lo, 1) {
		return 0, 0
	}
	return lo, hi
}

func nans(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = math.NaN()
	}
	return v
}

// selectGroups picks the configurations that get per-configuration figures.
func selectGroups(tv *testView, t *stats.TestSet, limit int) []*stats.Group {
	if len(t.Groups) <= limit {
		return t.Groups
	}
	idx := make([]int, len(t.Groups))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		da, db := primaryDiff(t.Groups[a]), primaryDiff(t.Groups[b])
		switch {
		case da > db:
			return -1
		case da < db:
			return 1
		}
		return 0
	})
	idx = idx[:limit]
	slices.Sort(idx)
	out := make([]*stats.Group, len(idx))
	for i, k := range idx {
		out[i] = t.Groups[k]
	}
	tv.SelectNote = fmt.Sprintf("Per-configuration figures are drawn for %d of the %d configurations: those with the largest difference between QUIC and TCP medians (set --max-charts to see more).", limit, len(t.Groups))
	return out
}

func groupCDF(g *stats.Group) chart {
	var series []cdfSeries
	var ns []string
	for _, cs := range g.Cells {
		series = append(series, cdfSeries{name: cs.Cell.Protocol, color: protoColor(cs.Cell.Protocol), sorted: sortedCopy(cs.Values())})
		ns = append(ns, fmt.Sprintf("%s n=%d", cs.Cell.Protocol, cs.Summary.N))
	}
	return cdfChart("CDF: "+g.Label(), strings.Join(ns, ", "), series, axisLabel(g.Cells[0].Cell), vg.Points(260), vg.Points(200))
}

// holCharts draws, for the representative sample of each protocol, the
// cumulative bytes received per stream over time (from "hol" bins, or from
// "chunks" when a sample has chunks of several streams and no bins). The
// panels of one configuration share one time axis, so that the protocols
// can be compared at a glance.
func holCharts(g *stats.Group) (chartGroup, bool) {
	cg := chartGroup{Title: "Head-of-line blocking: bytes received per stream, " + g.Label()}
	panels, xmax := holPanels(g)
	for _, p := range panels {
		cg.Charts = append(cg.Charts, linesChartX(p.title, "", p.lines, "time (ms)", "received (KiB)", len(p.lines) <= 8, xmax, vg.Points(330), vg.Points(220)))
	}
	return cg, len(cg.Charts) > 0
}

// holPanel is one protocol's head-of-line chart before drawing.
type holPanel struct {
	title string
	lines []lineSeries
}

// holMinAxis is the shortest time axis of a head-of-line chart (ms): a
// transfer that ended within its first bin still gets an axis that starts
// at 0, not one centred on it.
const holMinAxis = 1.0

// holPanels builds the head-of-line panels of g and the end of their
// common time axis (ms): the latest point of any of them. A point of the
// cumulative curve is drawn at the end of its bin, when the bytes in it
// had arrived (the bin width is the spacing of the series' bins; a series
// of one bin or of chunks is drawn at its points' times).
func holPanels(g *stats.Group) ([]holPanel, float64) {
	var out []holPanel
	xmax := holMinAxis
	for _, cs := range g.Cells {
		s := cs.Representative()
		if s == nil {
			continue
		}
		streams := seriesOf(s, model.SeriesHOL)
		binned := len(streams) > 0
		if !binned {
			if ch := seriesOf(s, model.SeriesChunks); len(ch) > 1 {
				streams = ch
			}
		}
		if len(streams) == 0 {
			continue
		}
		var lines []lineSeries
		for i, st := range streams {
			var bin float64
			if binned && len(st.Points) > 1 {
				bin = float64(st.Points[1].T-st.Points[0].T) / 1e6
			}
			pts := make(plotter.XYs, 0, len(st.Points)+1)
			pts = append(pts, plotter.XY{X: 0, Y: 0})
			var cum float64
			for _, p := range st.Points {
				cum += p.V
				x := float64(p.T)/1e6 + bin
				pts = append(pts, plotter.XY{X: x, Y: cum / 1024})
				xmax = math.Max(xmax, x)
			}
			lines = append(lines, lineSeries{name: streamName(st.Label), color: hexColor(categorical[i%len(categorical)]), pts: pts})
		}
		out = append(out, holPanel{
			title: fmt.Sprintf("%s · iteration %d (median sample)", cs.Cell.Protocol, s.Iteration),
			lines: lines,
		})
	}
	return out, xmax
}

// streamName is a legend entry for a stream's series: its label, which
// the workload writes as "stream N", or "stream " and the bare id.
func streamName(label string) string {
	if strings.HasPrefix(label, "stream ") {
		return label
	}
	return "stream " + label
}

// seriesOf returns the sample's series of a kind, sorted by label, each
// with its points in time order.
func seriesOf(s *model.Sample, kind string) []model.Series {
	var out []model.Series
	for _, se := range s.Timelines {
		if se.Kind == kind && len(se.Points) > 0 {
			se.Points = slices.Clone(se.Points)
			slices.SortStableFunc(se.Points, func(a, b model.Point) int {
				switch {
				case a.T < b.T:
					return -1
				case a.T > b.T:
					return 1
				}
				return 0
			})
			out = append(out, se)
		}
	}
	slices.SortStableFunc(out, func(a, b model.Series) int { return strings.Compare(a.Label, b.Label) })
	return out
}

// streamCharts draws the streaming test's inter-arrival times: over time
// for the representative samples, and their CDF pooled over all samples.
func streamCharts(g *stats.Group) (chartGroup, bool) {
	cg := chartGroup{Title: "Streaming: chunk inter-arrival times, " + g.Label()}
	var lines []lineSeries
	var cdfs []cdfSeries
	var p95s []string
	for _, cs := range g.Cells {
		var pooled []float64
		for _, s := range cs.Samples {
			for _, se := range seriesOf(s, model.SeriesInterval) {
				for _, p := range se.Points {
					pooled = append(pooled, p.V)
				}
			}
		}
		if len(pooled) == 0 {
			continue
		}
		sorted := sortedCopy(pooled)
		cdfs = append(cdfs, cdfSeries{name: cs.Cell.Protocol, color: protoColor(cs.Cell.Protocol), sorted: sorted})
		p95s = append(p95s, fmt.Sprintf("%s p95 %s ms (%d chunks)", cs.Cell.Protocol, num(stats.QuantileSorted(sorted, 0.95)), len(sorted)))
		if s := cs.Representative(); s != nil {
			var pts plotter.XYs
			for _, se := range seriesOf(s, model.SeriesInterval) {
				for _, p := range se.Points {
					pts = append(pts, plotter.XY{X: float64(p.T) / 1e6, Y: p.V})
				}
			}
			// X is a whole number of nanoseconds in ms: never NaN.
			slices.SortStableFunc(pts, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
			lines = append(lines, lineSeries{name: fmt.Sprintf("%s (iteration %d)", cs.Cell.Protocol, s.Iteration),
				color: protoColor(cs.Cell.Protocol), pts: pts, points: true})
		}
	}
	if len(cdfs) == 0 {
		return cg, false
	}
	cg.Charts = append(cg.Charts,
		linesChart("Inter-arrival time over the stream (median samples)", "", lines, "arrival time (ms)", "inter-arrival (ms)", true, vg.Points(330), vg.Points(220)),
		cdfChart("Inter-arrival CDF, all samples", strings.Join(p95s, "; "), cdfs, "inter-arrival (ms)", vg.Points(330), vg.Points(220)))
	return cg, true
}

// cpuCharts draws client and server CPU utilisation over time for the
// representative sample of each protocol.
func cpuCharts(g *stats.Group) (chartGroup, bool) {
	cg := chartGroup{Title: "CPU utilisation over time, " + g.Label()}
	var lines []lineSeries
	for _, cs := range g.Cells {
		s := cs.Representative()
		if s == nil {
			continue
		}
		for _, side := range []struct {
			kind, name string
			dashes     []vg.Length
		}{{model.SeriesCPUClient, "client", nil}, {model.SeriesCPUServer, "server", []vg.Length{vg.Points(4), vg.Points(2)}}} {
			for _, se := range seriesOf(s, side.kind) {
				pts := make(plotter.XYs, len(se.Points))
				for i, p := range se.Points {
					pts[i] = plotter.XY{X: float64(p.T) / 1e6, Y: 100 * p.V}
				}
				lines = append(lines, lineSeries{name: cs.Cell.Protocol + " " + side.name, color: protoColor(cs.Cell.Protocol), dashes: side.dashes, pts: pts})
			}
		}
	}
	if len(lines) == 0 {
		return cg, false
	}
	cg.Charts = []chart{linesChart("Median sample of each protocol (100% = one core)", "", lines, "time (ms)", "CPU (% of one core)", true, vg.Points(520), vg.Points(240))}
	return cg, true
}

// waterfallCharts draws the resource waterfall of each protocol's
// representative sample.
func waterfallCharts(g *stats.Group) (chartGroup, bool) {
	cg := chartGroup{Title: "Resource waterfalls (median sample per protocol), " + g.Label()}
	var xmax float64
	for _, cs := range g.Cells {
		if s := cs.Representative(); s != nil {
			for _, r := range s.Resources {
				xmax = math.Max(xmax, float64(max(r.End, r.TTFB, r.Start))/1e6)
			}
		}
	}
	for _, cs := range g.Cells {
		s := cs.Representative()
		if s == nil || len(s.Resources) == 0 {
			continue
		}
		cg.Charts = append(cg.Charts, waterfallFor(cs, s, xmax))
	}
	return cg, len(cg.Charts) > 0
}

func waterfallFor(cs *stats.CellStats, s *model.Sample, xmax float64) chart {
	const limit = 80
	res := slices.Clone(s.Resources)
	slices.SortStableFunc(res, func(a, b model.Resource) int { return cmp.Compare(a.Start, b.Start) })
	caption := "Light: waiting (start to first byte); dark: receiving (first byte to end)."
	if len(res) > limit {
		caption += fmt.Sprintf(" First %d of %d resources.", limit, len(res))
		res = res[:limit]
	}
	names := make([]string, len(res))
	spans := make([]span, len(res))
	var bytes int64
	for i, r := range res {
		names[i] = r.Name
		if r.Protocol != "" {
			names[i] += " [" + r.Protocol + "]"
		}
		spans[i] = span{start: float64(r.Start) / 1e6, ttfb: float64(max(r.TTFB, r.Start)) / 1e6, end: float64(max(r.End, r.TTFB, r.Start)) / 1e6}
		bytes += r.Bytes
	}
	title := fmt.Sprintf("%s · sample %d, iteration %d · %d resources, %s KiB · %s %s",
		cs.Cell.Protocol, s.ID, s.Iteration, len(s.Resources), num(float64(bytes)/1024), num(s.Value), cs.Cell.Unit)
	return waterfallChart(title, caption, names, spans, xmax)
}

// siteTableOf is study D's table: per configuration (site), the protocols
// side by side with page weight, request count, the primary metric and the
// median of every other recorded metric.
func siteTableOf(g *stats.Group) siteTable {
	st := siteTable{Title: g.Label()}
	for _, cs := range g.Cells {
		st.Protos = append(st.Protos, cs.Cell.Protocol)
	}
	format := num
	row := func(name string, f func(*model.Sample) (float64, bool)) {
		r := siteRow{Name: name}
		any := false
		for _, cs := range g.Cells {
			var v []float64
			for _, s := range cs.Samples {
				if x, ok := f(s); ok {
					v = append(v, x)
				}
			}
			if len(v) > 0 {
				any = true
			}
			r.Values = append(r.Values, format(stats.Median(v)))
		}
		if any {
			st.Rows = append(st.Rows, r)
		}
	}
	c0 := g.Cells[0].Cell
	row(axisLabel(c0)+" (median)", func(s *model.Sample) (float64, bool) { return s.Value, true })
	row("page weight (KiB, median)", func(s *model.Sample) (float64, bool) {
		if len(s.Resources) == 0 {
			return 0, false
		}
		var b int64
		for _, r := range s.Resources {
			b += r.Bytes
		}
		return float64(b) / 1024, true
	})
	derived := len(st.Rows)
	format = count
	row("requests (median)", func(s *model.Sample) (float64, bool) {
		return float64(len(s.Resources)), len(s.Resources) > 0
	})
	format = num
	hasResources := len(st.Rows) > derived
	var names []string
	for _, cs := range g.Cells {
		for _, s := range cs.Samples {
			for k := range s.Metrics {
				if !slices.Contains(names, k) {
					names = append(names, k)
				}
			}
		}
	}
	slices.Sort(names)
	for _, k := range names {
		if k == c0.Metric || hasResources && (k == "requests" || k == "resources") {
			continue
		}
		row(k+" (median)", func(s *model.Sample) (float64, bool) {
			v, ok := s.Metrics[k]
			return v, ok && !math.IsNaN(v)
		})
	}
	return st
}

// heatmaps draws study E's heatmaps: for each QUIC-vs-TCP protocol pair, the
// relative difference of medians over the two grid factors with the most
// values, one map per combination of the other varying factors.
func heatmaps(tv *testView, t *stats.TestSet, opts Options) {
	// varying factors, with values in plan order
	var names []string
	vals := map[string][]string{}
	for _, g := range t.Groups {
		for _, f := range g.Factors {
			if !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
			if !slices.Contains(vals[f.Name], f.Value) {
				vals[f.Name] = append(vals[f.Name], f.Value)
			}
		}
	}
	var varying []string
	for _, n := range names {
		if len(vals[n]) > 1 {
			varying = append(varying, n)
		}
	}
	if len(varying) < 2 {
		return
	}
	axes := slices.Clone(varying)
	slices.SortStableFunc(axes, func(a, b string) int { return len(vals[b]) - len(vals[a]) })
	xf, yf := axes[0], axes[1]
	if slices.Index(varying, yf) < slices.Index(varying, xf) {
		xf, yf = yf, xf
	}
	var facetNames []string
	for _, n := range varying {
		if n != xf && n != yf {
			facetNames = append(facetNames, n)
		}
	}
	value := func(g *stats.Group, name string) string {
		for _, f := range g.Factors {
			if f.Name == name {
				return f.Value
			}
		}
		return "(none)"
	}
	varies := func(f func(*stats.Group) string) bool {
		for _, g := range t.Groups[1:] {
			if f(g) != f(t.Groups[0]) {
				return true
			}
		}
		return false
	}
	facetOf := func(g *stats.Group, withScenario bool) string {
		var parts []string
		for _, n := range facetNames {
			parts = append(parts, n+"="+value(g, n))
		}
		if varies(func(g *stats.Group) string { return g.Client }) {
			parts = append(parts, "client="+g.Client)
		}
		if varies(func(g *stats.Group) string { return g.CC }) {
			parts = append(parts, "cc="+g.CC)
		}
		if withScenario {
			parts = append(parts, "scenario="+g.Scenario)
		}
		return strings.Join(parts, ", ")
	}
	withScenario := false
	seen := map[string]bool{}
	for _, g := range t.Groups {
		k := facetOf(g, false) + "\x00" + value(g, xf) + "\x00" + value(g, yf)
		if seen[k] {
			withScenario = true
			break
		}
		seen[k] = true
	}
	var facets []string
	for _, g := range t.Groups {
		if f := facetOf(g, withScenario); !slices.Contains(facets, f) {
			facets = append(facets, f)
		}
	}
	// QUIC-vs-TCP pairs, in order of appearance
	var pairs []string
	for _, g := range t.Groups {
		for _, c := range g.Comparisons {
			if model.IsQUIC(c.A.Cell.Protocol) && !model.IsQUIC(c.B.Cell.Protocol) && !slices.Contains(pairs, pairName(c)) {
				pairs = append(pairs, pairName(c))
			}
		}
	}
	total := len(pairs) * len(facets)
	xv, yv := vals[xf], vals[yf]
	if slices.ContainsFunc(t.Groups, func(g *stats.Group) bool { return value(g, xf) == "(none)" }) {
		xv = append(slices.Clone(xv), "(none)")
	}
	if slices.ContainsFunc(t.Groups, func(g *stats.Group) bool { return value(g, yf) == "(none)" }) {
		yv = append(slices.Clone(yv), "(none)")
	}
	for _, pair := range pairs {
		for _, facet := range facets {
			if len(tv.Heatmaps) >= opts.MaxHeatmaps {
				tv.HeatNote = fmt.Sprintf("Showing %d of %d heatmaps (set --max-heatmaps to see more).", opts.MaxHeatmaps, total)
				return
			}
			var cells []heatCell
			for _, g := range t.Groups {
				if facetOf(g, withScenario) != facet {
					continue
				}
				for _, c := range g.Comparisons {
					if pairName(c) != pair {
						continue
					}
					label := pct(c.RelDiff)
					switch c.Verdict {
					case stats.NoDifference:
						label += " n.s."
					case stats.Negligible:
						label += " ≈"
					case stats.Insufficient:
						// the effect stays visible where the design cannot decide
						label += " too few"
						if math.IsNaN(c.RelDiff) || math.IsInf(c.RelDiff, 0) {
							label = "too few"
						}
					}
					cells = append(cells, heatCell{x: slices.Index(xv, value(g, xf)), y: slices.Index(yv, value(g, yf)), color: heatColor(c), label: label})
				}
			}
			if len(cells) == 0 {
				continue
			}
			title := "Relative difference of medians, " + pair
			if facet != "" {
				title += " · " + facet
			}
			a, b, _ := strings.Cut(pair, " vs ")
			caption := fmt.Sprintf("(median %s − median %s) / median %s. Red: QUIC significantly better; blue: TCP significantly better; white (n.s.): no significant difference; grey (too few): the design cannot reach significance; deeper colour = larger ratio, saturating at 2×.", a, b, b)
			tv.Heatmaps = append(tv.Heatmaps, heatmapChart(title, caption, xf, xv, yf, yv, cells))
		}
	}
}

// evidenceLink is one sample's evidence in a comparison's details: a link
// to its directory and its files' names.
type evidenceLink struct {
	Text, Href, Files string
}

// evidenceLinks links the evidence of the cell's counted samples, by
// iteration, where Options.EvidenceDir has them once quicbench evidence
// --all wrote them.
func evidenceLinks(cs *stats.CellStats, opts Options) []evidenceLink {
	if len(opts.Evidence) == 0 {
		return nil
	}
	var out []evidenceLink
	for _, s := range cs.Samples {
		names := opts.Evidence[s.ID]
		if len(names) == 0 {
			continue
		}
		dir := path.Join(opts.EvidenceDir, fmt.Sprintf("sample-%d", s.ID))
		out = append(out, evidenceLink{Text: fmt.Sprintf("#%d (it %d)", s.ID, s.Iteration), Href: dir + "/", Files: strings.Join(names, ", ")})
	}
	return out
}
