// Package report turns a quicbench dataset into a self-contained HTML report
// (inline CSS, charts as inline SVG drawn with gonum/plot, nothing fetched
// from the network), a terminal summary, and the comparison of two runs.
//
// The report reproduces the figures of the studies quicbench re-runs: bar
// charts of means with 95% confidence intervals and medians, CDFs of the
// primary metric, tables of average/min/max with the percentage difference,
// per-site tables with protocols side by side, heatmaps of the relative
// difference over two grid factors, head-of-line and streaming timelines,
// CPU over time and resource waterfalls; and it adds what they lacked: the
// significance and size of every difference, the transport statistics that
// explain it, and every failed sample and validity warning.
//
// Output is deterministic: the same dataset and options give the same bytes
// (no clock is read; bootstrap intervals are seeded).
package report

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/stats"
)

// Options tune a report. The zero value is usable.
type Options struct {
	// Title replaces the default title ("quicbench: PLAN, run N").
	Title string
	// Source names where the dataset came from (a database path); shown in
	// the header. SourceB is the second dataset's source in a comparison.
	Source, SourceB string
	// Stats configures the statistics; zero fields take stats.Default's
	// values, and a zero Seed takes the run's seed.
	Stats stats.Config
	// MaxGroupCharts caps, per test, the configurations that get their own
	// CDF, timeline and waterfall figures (default 8); when a test has more,
	// those with the largest QUIC-vs-TCP difference are drawn.
	MaxGroupCharts int
	// MaxHeatmaps caps the heatmaps per test (default 12).
	MaxHeatmaps int
	// WaterfallSample is the ID of a sample whose resource waterfall is drawn
	// in its test's section (0: none besides the representative samples).
	WaterfallSample int64
	// RunWarnings are validity warnings about the whole run (the store keeps
	// them apart from the samples'); they are listed with the others.
	RunWarnings []string
	// Browser is the browser that took the run's chromium samples (product
	// and version, as the store keeps it: store.DB.RunBrowser); shown with
	// the environment when set.
	Browser string
}

func (o Options) withDefaults(ds *model.Dataset) Options {
	if o.Stats.Seed == 0 {
		o.Stats.Seed = ds.Run.Seed
	}
	o.Stats = o.Stats.WithDefaults()
	if o.MaxGroupCharts <= 0 {
		o.MaxGroupCharts = 8
	}
	if o.MaxHeatmaps <= 0 {
		o.MaxHeatmaps = 12
	}
	return o
}

// analyze fills in opts' defaults for ds and analyses ds with them: the
// first step of each single-run report.
func analyze(ds *model.Dataset, opts Options) (*stats.Analysis, Options, error) {
	if ds == nil {
		return nil, opts, errors.New("report: nil dataset")
	}
	opts = opts.withDefaults(ds)
	an, err := stats.Analyze(ds, opts.Stats)
	if err != nil {
		return nil, opts, fmt.Errorf("report: %w", err)
	}
	return an, opts, nil
}

//go:embed assets/report.html.tmpl assets/compare.html.tmpl assets/common.html.tmpl assets/style.css
var assets embed.FS

var (
	funcs = template.FuncMap{
		"join": strings.Join,
		"css":  func(s string) template.CSS { return template.CSS(s) },
	}
	reportTmpl  = template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/common.html.tmpl", "assets/report.html.tmpl"))
	compareTmpl = template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/common.html.tmpl", "assets/compare.html.tmpl"))
	styleCSS    = func() template.CSS {
		b, err := assets.ReadFile("assets/style.css")
		if err != nil {
			panic(err)
		}
		return template.CSS(b)
	}()
)

// HTML writes the report of ds to w as one self-contained HTML document.
func HTML(w io.Writer, ds *model.Dataset, opts Options) error {
	an, opts, err := analyze(ds, opts)
	if err != nil {
		return err
	}
	pg, err := buildPage(ds, an, opts)
	if err != nil {
		return err
	}
	if err := reportTmpl.ExecuteTemplate(w, "report", pg); err != nil {
		return fmt.Errorf("report: writing HTML: %w", err)
	}
	return nil
}

type kv struct{ K, V string }

type runView struct {
	ID                         int64
	Plan, Status, Hash         string
	Started, Finished, Elapsed string
	Seed                       uint64
	Cells, Samples, Counted    int
	Warmups, Failed            int
}

// worstClass is the CSS class of the failures-ranked-worst variant's
// verdict, as verdictClass is of the main verdict.
func worstClass(c *stats.Comparison) string {
	v := *c
	v.Verdict = c.Failures.WorstVerdict
	return verdictClass(&v)
}

type failureRow struct {
	Cell            string
	Failed, Invalid int
	Causes          []string
}

type warningRow struct {
	Text   string
	Count  int
	NCells int
	Cells  string
}

type page struct {
	Title, Source string
	CSS           template.CSS
	Run           runView
	Legend        []swatchView
	Rule          string
	Answer        *answerView
	Impls         []implRow
	Spreads       []spreadView
	Tests         []*testView
	Failures      []failureRow
	Warnings      []warningRow
	RunWarnings   []string
	Stops         []stopRow
	Env           []kv
	StatsCfg      []kv
	PlanText      string
	NComparisons  int
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func ruleStatement(cfg stats.Config, n int) string {
	fam := "within its family (the comparisons of one test and metric, across configurations and protocol pairs; the family and its size stand beside every p-value)"
	if cfg.CorrectionScope == stats.ScopeRun {
		fam = fmt.Sprintf("over all %d comparisons of this report", n)
	}
	return fmt.Sprintf("Verdict: two-sided Wilcoxon signed-rank test of the paired differences (the protocols of one iteration share the emulator seed; exact sign-flip distribution up to %d pairs), "+
		"or the two-sided Mann-Whitney U test where the samples are not paired; p-values Holm-corrected %s, significant below α = %g; "+
		"the direction follows the test's statistic (times: lower is better; goodput: higher is better). "+
		"“Too few samples” where even the most extreme outcome could not reach α after the correction (min p: the smallest p-value of the test for its sample sizes times the family size), with the pairs needed; "+
		"“no significant difference” only where the design could have reached α. "+
		"%s"+
		"Where the protocols failed at different rates (Fisher's exact test below α, or rates %.0f points apart) the verdict says so, and a second row ranks the failures as the worst values. "+
		"Page-load rule (study B): a protocol is better when it is at least %.0f%% better in at least %.0f%% of the paired runs (same iteration, same emulator seed); otherwise a tie. See docs/statistics.md.",
		stats.MaxExactPairs, fam, cfg.Alpha, bandStatement(cfg), 100*cfg.FailGap, 100*cfg.Margin, 100*cfg.Share)
}

// bandStatement states the rule of practical significance, or that it is
// off.
func bandStatement(cfg stats.Config) string {
	if cfg.MinEffect <= 0 {
		return "No smallest effect of interest is set: every significant difference is reported as one. "
	}
	b := stats.BandText(cfg.MinEffect)
	return fmt.Sprintf("Smallest effect of interest %s of B's median: where the 95%% interval of the Hodges-Lehmann estimate of the paired differences lies within %s the verdict is “negligible” whatever the p-value (two one-sided tests), "+
		"and a significant difference whose interval reaches into the band says “possibly negligible”. ", b, b)
}

func buildPage(ds *model.Dataset, an *stats.Analysis, opts Options) (*page, error) {
	run := ds.Run
	title := opts.Title
	if title == "" {
		title = fmt.Sprintf("quicbench: %s, run %d", orDash(run.PlanName), run.ID)
	}
	pg := &page{Title: title, Source: opts.Source, CSS: styleCSS, PlanText: run.PlanText, NComparisons: len(an.Comparisons)}
	pg.Rule = ruleStatement(an.Config, len(an.Comparisons))
	pg.Run = runView{ID: run.ID, Plan: run.PlanName, Status: run.Status, Hash: run.PlanHash, Seed: run.Seed,
		Started: fmtTime(run.Started), Finished: fmtTime(run.Finished), Elapsed: "–", Cells: len(ds.Cells), Samples: len(ds.Samples)}
	if !run.Started.IsZero() && !run.Finished.IsZero() {
		pg.Run.Elapsed = run.Finished.Sub(run.Started).Round(time.Second).String()
	}
	for _, cs := range an.Cells {
		pg.Run.Counted += cs.Summary.N
		pg.Run.Warmups += cs.Warmups
		pg.Run.Failed += len(cs.Failed)
	}
	pg.Legend = swatches(protocols(an.Cells))
	ids := make(map[*stats.Comparison]string, len(an.Comparisons))
	for i, c := range an.Comparisons {
		ids[c] = fmt.Sprintf("cmp-%d", i+1)
	}
	pg.Answer = buildAnswer(an, ids)
	for _, t := range an.Tests {
		tv, err := buildTest(ds, an, t, opts, ids)
		if err != nil {
			return nil, err
		}
		pg.Tests = append(pg.Tests, tv)
	}
	if opts.WaterfallSample != 0 {
		found := false
		for _, tv := range pg.Tests {
			found = found || tv.chosenFound
		}
		if !found {
			return nil, fmt.Errorf("report: waterfall sample %d: no valid sample with that id has resources", opts.WaterfallSample)
		}
	}
	pg.Failures, pg.Warnings = validity(an)
	pg.RunWarnings = opts.RunWarnings
	pg.Stops = stopRows(ds.Stops)
	pg.Env = envRows(ds, opts)
	c := an.Config
	pg.StatsCfg = []kv{
		{"confidence level", fmt.Sprintf("%g", c.Level)},
		{"significance level (after Holm)", fmt.Sprintf("%g", c.Alpha)},
		{"Holm correction within", scopeText(c.CorrectionScope)},
		{"failure rates noted from", fmt.Sprintf("Fisher p < %g or %.0f points apart", c.Alpha, 100*c.FailGap)},
		{"bootstrap resamples", strconv.Itoa(c.Resamples)},
		{"bootstrap seed", strconv.FormatUint(c.Seed, 10)},
		{"page-load rule", fmt.Sprintf("≥%.0f%% better in ≥%.0f%% of pairs", 100*c.Margin, 100*c.Share)},
		{"smallest effect of interest", minEffectText(c)},
	}
	pg.Impls = implRows(an)
	pg.Spreads = spreadViews(an, ids)
	return pg, nil
}

// minEffectText describes the smallest effect of interest for the
// settings table.
func minEffectText(c stats.Config) string {
	if c.MinEffect <= 0 {
		return "off"
	}
	return stats.BandText(c.MinEffect) + " of the reference's median (95% CI within: negligible)"
}

// scopeText describes a correction scope.
func scopeText(scope string) string {
	if scope == stats.ScopeRun {
		return "the run (all comparisons)"
	}
	return "families: one test and metric"
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func protoRank(p string) int {
	if i := slices.Index(model.Protocols, p); i >= 0 {
		return i
	}
	return len(model.Protocols)
}

// protocols lists the protocols of cells once each, in display order:
// model.Protocols' order, then any others in the order they first appear.
func protocols(cells []*stats.CellStats) []string {
	var protos []string
	for _, cs := range cells {
		if !slices.Contains(protos, cs.Cell.Protocol) {
			protos = append(protos, cs.Cell.Protocol)
		}
	}
	slices.SortStableFunc(protos, func(a, b string) int { return protoRank(a) - protoRank(b) })
	return protos
}

// testProtocols lists the protocols of t's cells as protocols does.
func testProtocols(t *stats.TestSet) []string {
	var cells []*stats.CellStats
	for _, g := range t.Groups {
		cells = append(cells, g.Cells...)
	}
	return protocols(cells)
}

func envRows(ds *model.Dataset, opts Options) []kv {
	run := ds.Run
	e := run.Env
	rows := []kv{
		{"plan", orDash(run.PlanName)},
		{"plan hash", orDash(run.PlanHash)},
		{"run seed", strconv.FormatUint(run.Seed, 10)},
		{"quicbench", strings.TrimSpace(orDash(e.Version) + " " + e.Commit)},
		{"Go", orDash(e.GoVersion)},
		{"quic-go", orDash(e.QuicGoVersion)},
		{"kernel", orDash(e.Kernel)},
		{"CPU", fmt.Sprintf("%s × %d", orDash(e.CPUModel), e.CPUs)},
		{"host", orDash(e.Hostname)},
		{"TCP congestion control (client / server)", orDash(e.CCClient) + " / " + orDash(e.CCServer)},
	}
	if opts.Browser != "" {
		rows = append(rows, kv{"browsers", opts.Browser})
	}
	for _, k := range slices.Sorted(maps.Keys(e.Peers)) {
		rows = append(rows, kv{"peer " + k, e.Peers[k]})
	}
	if line := parallelLine(ds); line != "" {
		rows = append(rows, kv{"parallel testbeds", line})
	}
	rows = append(rows, overheadRows(ds)...)
	for _, k := range slices.Sorted(maps.Keys(e.Sysctls)) {
		rows = append(rows, kv{"sysctl " + k, e.Sysctls[k]})
	}
	return rows
}

// parallelLine describes the parallelism of a run whose samples were taken
// on several testbeds at once ("" for a run of one testbed at a time): how
// many testbeds, how many at most at once, and the share of samples that
// ran beside others, with where to find the check that parallel runs give
// the answer serial runs give.
func parallelLine(ds *model.Dataset) string {
	slots := map[int]bool{}
	most, beside := 1, 0
	for _, s := range ds.Samples {
		slots[s.Slot] = true
		most = max(most, s.Concurrency)
		if s.Concurrency > 1 {
			beside++
		}
	}
	if most <= 1 && len(slots) <= 1 {
		return ""
	}
	return fmt.Sprintf("%d testbeds, up to %d taking samples at once; %d of %d samples ran beside others "+
		"(each iteration's protocols on one testbed, paired as in a serial run). Whether parallel testbeds "+
		"change the answer on this machine: quicbench check-parallel (docs/performance.md, \"Does parallel change the answer?\")",
		len(slots), most, beside, len(ds.Samples))
}

// overheadRows renders the per-sample overhead of each client of ds
// (stats.ClientOverhead): the total, then its parts (ClientOverhead.Parts).
func overheadRows(ds *model.Dataset) []kv {
	var rows []kv
	for _, o := range stats.DatasetOverheads(ds) {
		name := clientName(o.Client)
		rows = append(rows, kv{"per-sample overhead, " + name + " (p50 / p95 / max)", o.Total.String()})
		for _, p := range o.Parts() {
			rows = append(rows, kv{"  of which " + p.Label, p.Of(o).String()})
		}
	}
	return rows
}

// clientName names a client for readers, with what its samples include
// (its stack's note in the registry).
func clientName(c string) string {
	if c == model.ClientBuiltin || c == "" {
		return "built-in client"
	}
	st, ok := peers.ClientStack(c)
	if !ok {
		return c
	}
	if st.Client.Note != "" {
		return st.LabelFor("") + " (" + st.Client.Note + ")"
	}
	return st.LabelFor("")
}

// validity lists the failed and invalid samples per cell with their causes,
// and the validity warnings grouped by text.
func validity(an *stats.Analysis) ([]failureRow, []warningRow) {
	var fails []failureRow
	type wcount struct {
		n     int
		cells []string
		per   map[string]int
		rng   *warnRange
	}
	warns := map[string]*wcount{}
	var worder []string
	for _, cs := range an.Cells {
		if len(cs.Failed) > 0 {
			fr := failureRow{Cell: cs.Cell.Key}
			type cause struct {
				iters []string
			}
			causes := map[string]*cause{}
			var order []string
			for _, s := range cs.Failed {
				msg, status := s.Error, string(s.Status)
				switch {
				case s.Status == model.StatusInvalid:
					fr.Invalid++
				case s.Status == model.StatusFailed:
					fr.Failed++
				default: // ok with a non-finite value
					fr.Invalid++
					msg, status = fmt.Sprintf("value is %v", s.Value), string(model.StatusInvalid)
				}
				msg = status + ": " + orDash(msg)
				c, ok := causes[msg]
				if !ok {
					c = &cause{}
					causes[msg] = c
					order = append(order, msg)
				}
				c.iters = append(c.iters, strconv.Itoa(s.Iteration))
			}
			for _, m := range order {
				c := causes[m]
				fr.Causes = append(fr.Causes, fmt.Sprintf("%s ×%d (iteration %s)", m, len(c.iters), strings.Join(c.iters, ", ")))
			}
			fails = append(fails, fr)
		}
		var all []*model.Sample
		all = append(all, cs.Samples...)
		all = append(all, cs.Failed...)
		for _, s := range all {
			for _, w := range s.Warnings {
				toks := tokenizeWarning(w)
				key := warningShape(toks)
				wc, ok := warns[key]
				if !ok {
					wc = &wcount{per: map[string]int{}, rng: newWarnRange(toks)}
					warns[key] = wc
					worder = append(worder, key)
				} else {
					wc.rng.add(toks)
				}
				wc.n++
				if wc.per[cs.Cell.Key] == 0 {
					wc.cells = append(wc.cells, cs.Cell.Key)
				}
				wc.per[cs.Cell.Key]++
			}
		}
	}
	var wrows []warningRow
	for _, w := range worder {
		wc := warns[w]
		parts := make([]string, len(wc.cells))
		for i, c := range wc.cells {
			parts[i] = fmt.Sprintf("%s (%d)", c, wc.per[c])
		}
		wrows = append(wrows, warningRow{Text: wc.rng.text(), Count: wc.n, NCells: len(wc.cells), Cells: strings.Join(parts, "; ")})
	}
	return fails, wrows
}

// refCell is the group's reference for "% difference" columns: h2, else
// the raw TCP transport, else HTTP/1.1, else the first cell.
func refCell(g *stats.Group) *stats.CellStats {
	for _, p := range []string{model.ProtoH2, model.ProtoTCP, model.ProtoH1, model.ProtoH1C} {
		if c := g.Cell(p); c != nil {
			return c
		}
	}
	return g.Cells[0]
}

// primaryDiff is the magnitude of the largest QUIC-vs-TCP difference of a
// group, |ln(median A / median B)|, or -1.
func primaryDiff(g *stats.Group) float64 {
	best := -1.0
	for _, c := range g.Comparisons {
		if !model.IsQUIC(c.A.Cell.Protocol) || model.IsQUIC(c.B.Cell.Protocol) {
			continue
		}
		r := c.A.Summary.Median / c.B.Summary.Median
		if r > 0 && !math.IsInf(r, 0) {
			best = math.Max(best, math.Abs(math.Log(r)))
		}
	}
	return best
}

// stopRow is one cell group of an adaptive run in the report: how many
// iterations it took and why it stopped.
type stopRow struct {
	Group, Reason, Precision, WorstPair string
	Iterations                          int
}

// stopRows formats the group stops of an adaptive run.
func stopRows(stops []model.GroupStop) []stopRow {
	out := make([]stopRow, 0, len(stops))
	for _, st := range stops {
		prec := "not computable"
		if !math.IsInf(st.Precision, 0) && !math.IsNaN(st.Precision) {
			prec = fmt.Sprintf("±%.2f%%", st.Precision)
		}
		reason := "precision reached"
		if st.Reason == model.StopMaximum {
			reason = "maximum iterations reached first"
		}
		out = append(out, stopRow{Group: st.Group, Reason: reason, Precision: prec, WorstPair: st.WorstPair, Iterations: st.Iterations})
	}
	return out
}

// stopSummary is one line on an adaptive run's stops for the terminal
// summary ("" for a run of fixed iterations).
func stopSummary(stops []model.GroupStop) string {
	if len(stops) == 0 {
		return ""
	}
	var prec, maxed []int
	for _, st := range stops {
		if st.Reason == model.StopMaximum {
			maxed = append(maxed, st.Iterations)
		} else {
			prec = append(prec, st.Iterations)
		}
	}
	span := func(v []int) string {
		lo, hi := slices.Min(v), slices.Max(v)
		if lo == hi {
			return fmt.Sprint(lo)
		}
		return fmt.Sprintf("%d-%d", lo, hi)
	}
	line := "Adaptive iterations: "
	if len(prec) > 0 {
		line += fmt.Sprintf("%d groups reached the precision target after %s iterations", len(prec), span(prec))
	}
	if len(maxed) > 0 {
		if len(prec) > 0 {
			line += ", "
		}
		line += fmt.Sprintf("%d stopped at the maximum (%s iterations) before reaching it", len(maxed), span(maxed))
	}
	return line + "."
}
