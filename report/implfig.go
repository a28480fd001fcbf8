package report

import (
	"fmt"
	"html/template"
	"math"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
	"gonum.org/v1/plot"
)

// spreadView is the "protocol or implementation?" figure of one test and
// configuration measured by several implementations (stats.ImplSpread):
// every cell's median with its interval, grouped by protocol, beside each
// stack's protocol difference, with the decomposition of the medians'
// variation.
type spreadView struct {
	Title, Anchor     string
	Medians, Diffs    template.HTML
	Bar               template.HTML // the decomposition's shares as a stacked bar
	Summary, Decomp   string
	MediansCaption    string
	HasDiffs, HasDecp bool
}

// spreadViews draws the figures of an analysis' ImplSpreads.
func spreadViews(an *stats.Analysis, ids map[*stats.Comparison]string) []spreadView {
	var out []spreadView
	for _, sp := range an.Spreads() {
		band := math.Max(0, an.Config.MinEffect)
		v := spreadView{Title: sp.Test + " · " + sp.Label, Anchor: anchor("test-", sp.Test)}
		v.Medians, v.MediansCaption = spreadMediansSVG(sp)
		if len(sp.Stacks) > 0 {
			v.Diffs, v.HasDiffs = spreadDiffsSVG(sp, ids, band), true
		}
		v.Summary = spreadSummary(sp)
		v.Decomp, v.HasDecp = decompText(sp.Decomposition)
		v.Bar = decompBar(sp.Decomposition)
		out = append(out, v)
	}
	return out
}

// spreadMediansSVG draws every cell's median with its 95% interval on one
// axis, a block per protocol; the axis is logarithmic when the values
// span more than ten-fold.
func spreadMediansSVG(sp *stats.ImplSpread) (template.HTML, string) {
	const (
		rowH, headH, font = 17.0, 20.0, 11.0
		labelW, plotW     = 190.0, 300.0
		top               = 8.0
	)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range sp.Rows {
		s := r.Cell.Summary
		for _, v := range []float64{s.Median, s.MedianCI.Lo, s.MedianCI.Hi} {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0, 1
	}
	logScale := lo > 0 && hi/lo > 10
	if !logScale {
		lo = math.Min(lo, 0)
	}
	if hi <= lo {
		hi = lo + 1
	}
	var ticks []plot.Tick
	if logScale {
		lo, hi = lo/1.15, hi*1.15
		ticks = logTicks{}.Ticks(lo, hi)
	} else {
		hi += 0.04 * (hi - lo)
		ticks = niceTicks{}.Ticks(lo, hi)
	}
	x0, x1 := labelW+8, labelW+8+plotW
	xOf := func(v float64) float64 {
		if logScale {
			return x0 + (math.Log(v)-math.Log(lo))/(math.Log(hi)-math.Log(lo))*(x1-x0)
		}
		return x0 + (v-lo)/(hi-lo)*(x1-x0)
	}
	h := top
	prev := ""
	for _, r := range sp.Rows {
		if r.Protocol != prev {
			h += headH
			prev = r.Protocol
		}
		h += rowH
	}
	s := &svgDoc{w: x1 + 16, h: h + 32}
	for _, tk := range ticks {
		if tk.Label == "" || tk.Value < lo || tk.Value > hi {
			continue
		}
		x := xOf(tk.Value)
		s.line(x, top, x, h+4, "#e4e4e8", 1, "")
		s.text(x, h+16, "middle", 10, "#5f6368", "", tk.Label)
	}
	scale := ""
	if logScale {
		scale = ", log scale"
	}
	s.text((x0+x1)/2, h+28, "middle", 10, "#5f6368", "", "median "+axisUnit(sp)+" with 95% CI"+scale)
	y := top
	prev = ""
	for _, r := range sp.Rows {
		col := protoColorHex(r.Protocol)
		if r.Protocol != prev {
			s.rect(4, y+headH-14, 10, 10, col, "")
			s.text(18, y+headH-5, "start", font+0.5, "#1d1d1f", "700", r.Protocol)
			y += headH
			prev = r.Protocol
		}
		sm := r.Cell.Summary
		s.raw(`<g><title>%s</title>`, esc(fmt.Sprintf("%s over %s: median %s %s [%s], n=%d", stats.StackName(r.Cell.Cell), r.Protocol, num(sm.Median), sp.Unit, interval(sm.MedianCI), sm.N)))
		s.text(18, y+rowH-5, "start", font, "#1d1d1f", "", fitText(stats.StackName(r.Cell.Cell), font, labelW-20))
		cy := y + rowH/2
		if sm.MedianCI.Valid() {
			s.line(xOf(math.Max(sm.MedianCI.Lo, lo)), cy, xOf(math.Min(sm.MedianCI.Hi, hi)), cy, col, 2, "")
		}
		if !math.IsNaN(sm.Median) {
			s.circle(xOf(sm.Median), cy, 3.8, col, "#1d1d1f")
		}
		s.raw(`</g>`)
		y += rowH
	}
	caption := fmt.Sprintf("Each client → server pair's median of %s with its 95%% bootstrap interval, by protocol, on one axis.", sp.Metric)
	return s.html("fig spread", "Medians of every implementation, grouped by protocol"), caption
}

// axisUnit is "(unit)" or "".
func axisUnit(sp *stats.ImplSpread) string {
	s := sp.Metric
	if sp.Unit != "" {
		s += " (" + sp.Unit + ")"
	}
	return s
}

// spreadDiffsSVG draws, per stack measured with several protocols, its
// protocol comparisons' effects with their intervals on a log-ratio axis,
// the band of negligible differences shaded.
func spreadDiffsSVG(sp *stats.ImplSpread, ids map[*stats.Comparison]string, band float64) template.HTML {
	const (
		rowH, font    = 17.0, 11.0
		labelW, plotW = 210.0, 240.0
		top           = 18.0
	)
	var points, ends []float64
	n := 0
	for _, st := range sp.Stacks {
		for _, c := range st.Comparisons {
			e, ci := effectOf(c)
			points, ends = append(points, e), append(ends, ci.Lo, ci.Hi)
			n++
		}
	}
	ax := newRatioAxis(points, ends, band, labelW+8, labelW+8+plotW)
	h := top + float64(n)*rowH
	s := &svgDoc{w: labelW + 8 + plotW + 70, h: h + 32}
	if band > 0 {
		bx0, _ := ax.pos(-band)
		bx1, _ := ax.pos(band)
		s.rect(bx0, top-4, bx1-bx0, h-top+8, "#ececf0", "")
		s.text((bx0+bx1)/2, top-7, "middle", 10, "#5f6368", "", stats.BandText(band))
	}
	for _, tk := range ax.ticks(40) {
		x, _ := ax.pos(tk)
		s.line(x, top-4, x, h+4, "#e4e4e8", 1, "")
		s.text(x, h+16, "middle", 10, "#5f6368", "", tickText(tk))
	}
	zx, _ := ax.pos(0)
	s.line(zx, top-4, zx, h+4, "#8a8a90", 1, "")
	s.text(labelW+8+plotW/2, h+28, "middle", 10, "#5f6368", "", "A vs B per stack, % of B's median, 95% CI")
	y := top
	for _, st := range sp.Stacks {
		for _, c := range st.Comparisons {
			s.link("#"+ids[c], fmt.Sprintf("%s, %s: %s", st.Stack, pairName(c), c.Text()))
			s.rect(0, y, s.w, rowH, "#ffffff", ` fill-opacity="0"`)
			s.text(6, y+rowH-5, "start", font, "#1d1d1f", "", fitText(st.Stack+" · "+pairName(c), font, labelW-8))
			e, ci := effectOf(c)
			col := strokeColor(c)
			cy := y + rowH/2
			if ci.Valid() {
				lo, clo := ax.pos(ci.Lo)
				hi, chi := ax.pos(ci.Hi)
				s.line(lo, cy, hi, cy, col, 2, "")
				if clo {
					s.raw(`<path d="M%s %s l6 -4 v8 z" fill="%s"/>`, f(lo), f(cy), col)
				}
				if chi {
					s.raw(`<path d="M%s %s l-6 -4 v8 z" fill="%s"/>`, f(hi), f(cy), col)
				}
			}
			if !math.IsNaN(e) && !math.IsInf(e, 0) {
				x, _ := ax.pos(e)
				fill := col
				if !ci.Valid() {
					fill = "#ffffff"
				}
				s.circle(x, cy, 3.6, fill, col)
				s.text(labelW+8+plotW+8, y+rowH-5, "start", 10, col, "", strings.TrimSpace(shortPct(e)+" "+mark(c)))
			}
			s.endLink()
			y += rowH
		}
	}
	return s.html("fig spread-diff", "Protocol difference per implementation")
}

// spreadSummary says whether the QUIC-vs-TCP verdict holds for every
// stack measured with both: "h3 vs h2, over the 2 stacks measured with
// both: QUIC faster with 2".
func spreadSummary(sp *stats.ImplSpread) string {
	counts := map[string]int{}
	var order []string
	pairs := map[string]bool{}
	var pairOrder []string
	total := 0
	for _, st := range sp.Stacks {
		for _, c := range st.Comparisons {
			if !model.IsQUIC(c.A.Cell.Protocol) || model.IsQUIC(c.B.Cell.Protocol) {
				continue
			}
			total++
			if p := pairName(c); !pairs[p] {
				pairs[p] = true
				pairOrder = append(pairOrder, p)
			}
			w := c.Headline()
			if _, ok := counts[w]; !ok {
				order = append(order, w)
			}
			counts[w]++
		}
	}
	if total == 0 {
		return "No stack was measured over both QUIC and TCP here: the medians alone set the protocols side by side."
	}
	parts := make([]string, len(order))
	for i, w := range order {
		parts[i] = fmt.Sprintf("%s with %d", w, counts[w])
	}
	return fmt.Sprintf("QUIC vs TCP (%s), %d comparisons over the stacks measured with both: %s.",
		strings.Join(pairOrder, ", "), total, strings.Join(parts, "; "))
}

// decompText states the decomposition of the medians' variation.
func decompText(d stats.Decomposition) (string, bool) {
	var effects []string
	for _, e := range d.Effects {
		effects = append(effects, fmt.Sprintf("%s vs %s %s", e.A, e.B, shortPct(e.Rel)))
	}
	switch d.Design {
	case stats.DesignCrossed:
		if math.IsNaN(d.Protocol) {
			return fmt.Sprintf("Variation of the log medians over %d stacks measured with every protocol: not computable (a median that is not positive, or no variation).", d.Stacks), true
		}
		return fmt.Sprintf("Share of the variation of the log medians (%d stacks measured with every protocol, two-way): protocol %s, implementation %s, protocol × implementation %s. Protocol effect over these stacks (ratio of geometric means): %s.",
			d.Stacks, sharePct(d.Protocol), sharePct(d.Implementation), sharePct(d.Interaction), strings.Join(effects, ", ")), true
	case stats.DesignNested:
		if math.IsNaN(d.Protocol) {
			return fmt.Sprintf("Variation of the log medians of %d cells: not computable (a median that is not positive, or no variation).", d.Cells), true
		}
		return fmt.Sprintf("Share of the variation of the log medians (%d cells; fewer than two stacks measured every protocol, so implementations are nested in protocols): protocol %s, implementation within protocol %s. Protocol effect (ratio of geometric means over all cells): %s.",
			d.Cells, sharePct(d.Protocol), sharePct(d.Implementation), strings.Join(effects, ", ")), true
	}
	return "", false
}

func sharePct(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) }

// decompBar draws the decomposition's shares as one stacked bar with a
// key; "" when there are none.
func decompBar(d stats.Decomposition) template.HTML {
	if d.Design == "" || math.IsNaN(d.Protocol) {
		return ""
	}
	parts := []struct {
		name, color string
		v           float64
	}{{"protocol", "#3b3b44", d.Protocol}, {"implementation", "#a6a6ae", d.Implementation}}
	if d.Design == stats.DesignCrossed {
		parts = append(parts, struct {
			name, color string
			v           float64
		}{"protocol × implementation", "#dadae0", d.Interaction})
	} else {
		parts[1].name = "implementation within protocol"
	}
	const w, x0 = 420.0, 4.0
	s := &svgDoc{w: w + 8, h: 44}
	x := x0
	for _, p := range parts {
		pw := w * math.Max(0, p.v)
		s.raw(`<g><title>%s</title>`, esc(fmt.Sprintf("%s: %s of the variation", p.name, sharePct(p.v))))
		s.rect(x, 4, pw, 16, p.color, ` stroke="#ffffff"`)
		s.raw(`</g>`)
		x += pw
	}
	kx := x0
	for _, p := range parts {
		label := fmt.Sprintf("%s %s", p.name, sharePct(p.v))
		s.rect(kx, 28, 10, 10, p.color, ` stroke="#9a9aa0" stroke-width="0.5"`)
		s.text(kx+14, 37, "start", 10, "#1d1d1f", "", label)
		kx += 14 + textWidth(label, 10) + 14
	}
	s.w = math.Max(s.w, kx)
	return s.html("fig decomp", "Shares of the variation of the medians: protocol and implementation")
}
