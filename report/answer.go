package report

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// This file draws the report's first screen (section "answer"): the verdict
// matrix, network scenarios by tests, and the forest plot of every
// protocol comparison's effect; and the same matrix in text for the
// terminal summary.

// answerView is the first screen.
type answerView struct {
	Matrix, Forest   template.HTML
	Rows, Cols, Size int    // matrix rows (scenarios), columns, cells (groups)
	Band             string // "±5%", or "" when the rule is off
	Legend           []legendItem
	Notes            []string
}

type legendItem struct {
	Class, Mark, Text string
	Color             template.CSS
}

// matrix lays the groups of an analysis out as network scenarios (rows,
// in plan order) by tests (columns: a test set, and the parameters,
// client, server and congestion control that tell its groups apart).
type matrix struct {
	rows  []string
	cols  []matrixCol
	cells map[[2]int]*stats.Group
	colOf map[*stats.Group]int
}

type matrixCol struct {
	key, label string
	test       *stats.TestSet
}

// columnParts names what besides the scenario sets a group apart within
// its test: the factors its scenario does not name, a client other than
// the built-in one, a server other than quicbench's, and the congestion
// control when not cubic.
func columnParts(g *stats.Group) []string {
	tokens := strings.FieldsFunc(g.Scenario, func(r rune) bool { return strings.ContainsRune("-_/,=:;· ", r) })
	var parts []string
	for _, f := range g.Factors {
		if !slices.Contains(tokens, f.Value) && !strings.Contains(g.Scenario, f.Name+"="+f.Value) {
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
	return parts
}

func buildMatrix(an *stats.Analysis) *matrix {
	m := &matrix{cells: map[[2]int]*stats.Group{}, colOf: map[*stats.Group]int{}}
	for _, t := range an.Tests {
		var keys [][]string
		var colIdx []int
		for _, g := range t.Groups {
			if len(g.Comparisons) == 0 {
				continue
			}
			parts := columnParts(g)
			key := t.Name + "\x00" + strings.Join(parts, "\x00")
			c := slices.IndexFunc(m.cols, func(c matrixCol) bool { return c.key == key })
			if c < 0 {
				m.cols = append(m.cols, matrixCol{key: key, test: t})
				c = len(m.cols) - 1
				keys = append(keys, parts)
				colIdx = append(colIdx, c)
			}
			r := slices.Index(m.rows, g.Scenario)
			if r < 0 {
				m.rows = append(m.rows, g.Scenario)
				r = len(m.rows) - 1
			}
			if _, dup := m.cells[[2]int{r, c}]; dup {
				// two groups on one scenario and column (a factor value
				// hidden by the scenario's name): a column of their own
				m.cols = append(m.cols, matrixCol{key: key + "\x00" + g.Key, test: t})
				c = len(m.cols) - 1
				keys = append(keys, append(slices.Clone(parts), g.Label()))
				colIdx = append(colIdx, c)
			}
			m.cells[[2]int{r, c}] = g
			m.colOf[g] = c
		}
		// label: the test, then only the parts that differ between its columns
		for i, c := range colIdx {
			var show []string
			for _, p := range keys[i] {
				shared := len(keys) > 1
				for _, other := range keys {
					shared = shared && slices.Contains(other, p)
				}
				if !shared && (len(keys) > 1 || !strings.Contains(p, "=")) {
					show = append(show, p)
				}
			}
			m.cols[c].label = strings.Join(append([]string{t.Name}, show...), " · ")
		}
	}
	return m
}

// displayOrder returns a group's comparisons with the QUIC-vs-TCP ones
// first, otherwise in the analysis' order.
func displayOrder(g *stats.Group) []*stats.Comparison {
	cs := slices.Clone(g.Comparisons)
	slices.SortStableFunc(cs, func(x, y *stats.Comparison) int { return quicVsTCP(y) - quicVsTCP(x) })
	return cs
}

func quicVsTCP(c *stats.Comparison) int {
	if model.IsQUIC(c.A.Cell.Protocol) && !model.IsQUIC(c.B.Cell.Protocol) {
		return 1
	}
	return 0
}

// effectOf is the relative effect a figure shows for a comparison: the
// Hodges-Lehmann estimate in % of B's median when the design is paired,
// else the difference of the medians; and its interval (NaN without one).
func effectOf(c *stats.Comparison) (float64, stats.Interval) {
	if !math.IsNaN(c.Effect.Rel) {
		return c.Effect.Rel, c.Effect.CI
	}
	return c.RelDiff, stats.Interval{Lo: math.NaN(), Hi: math.NaN()}
}

// verdictColor is a comparison's colour in the figures: the winning
// protocol family's (QUIC red, TCP blue, purple between two protocols of
// one family), deeper with the size of the effect (saturating at a
// two-fold ratio); grey when negligible, white when not significant, pale
// yellow when the design could not decide.
func verdictColor(c *stats.Comparison) string {
	e, _ := effectOf(c)
	t := 0.0
	if 1+e > 0 && !math.IsNaN(e) && !math.IsInf(e, 0) {
		t = math.Min(1, math.Abs(math.Log(1+e))/math.Ln2)
	}
	mix := func(r, g, b float64) string {
		f := 0.3 + 0.7*t
		m := func(v float64) int { return int(math.Round(255 - f*(255-v))) }
		return fmt.Sprintf("#%02x%02x%02x", m(r), m(g), m(b))
	}
	switch verdictClass(c) {
	case "quic":
		return mix(178, 24, 43)
	case "tcp":
		return mix(33, 102, 172)
	case "a", "b":
		return mix(91, 58, 134)
	case "neg":
		return "#dcdce2"
	case "few":
		return "#fff1c2"
	}
	return "#ffffff"
}

// strokeColor is a comparison's colour for marks on white: the family's
// full colour, or grey.
func strokeColor(c *stats.Comparison) string {
	switch verdictClass(c) {
	case "quic":
		return "#b2182b"
	case "tcp":
		return "#2166ac"
	case "a", "b":
		return "#5b3a86"
	case "few":
		return "#a07800"
	case "neg":
		return "#6e6e76"
	}
	return "#9a9aa0"
}

// mark is the symbol a comparison carries in the figures: "≈" negligible,
// "(≈)" significant but possibly negligible, "?" too few samples.
func mark(c *stats.Comparison) string {
	switch {
	case c.Verdict == stats.Negligible:
		return "≈"
	case c.PossiblyNegligible():
		return "(≈)"
	case c.Verdict == stats.Insufficient:
		return "?"
	}
	return ""
}

// tooltip is the full verdict of a comparison for a figure's tooltip.
func tooltip(g *stats.Group, c *stats.Comparison) string {
	e, ci := effectOf(c)
	s := fmt.Sprintf("%s · %s: %s; effect %s", g.Label(), pairName(c), c.Text(), shortPct(e))
	if ci.Valid() {
		s += fmt.Sprintf(" [%s, %s]", shortPct(ci.Lo), shortPct(ci.Hi))
	}
	return s + ", p (Holm) " + stats.FormatP(c.P)
}

// textOnHex returns black or white for text on a "#rrggbb" background.
func textOnHex(bg string) string {
	var r, g, b uint8
	fmt.Sscanf(bg, "#%02x%02x%02x", &r, &g, &b)
	if (0.299*float64(r)+0.587*float64(g)+0.114*float64(b))/255 < 0.55 {
		return "#ffffff"
	}
	return "#1d1d1f"
}

// matrixSVG draws the matrix: one cell per group, one line per
// comparison (A–B, its effect, its mark), each linking to its row in the
// test's comparison table.
func matrixSVG(m *matrix, ids map[*stats.Comparison]string) template.HTML {
	const (
		cellW, lineH, pad, headH = 134.0, 17.0, 3.0, 34.0
		font                     = 11.0
	)
	rowLabelW := 70.0
	for _, r := range m.rows {
		rowLabelW = math.Max(rowLabelW, math.Min(200, 1.12*textWidth(r, font)+14)) // bold: wider
	}
	rowH := make([]float64, len(m.rows))
	for r := range m.rows {
		n := 1
		for c := range m.cols {
			if g := m.cells[[2]int{r, c}]; g != nil {
				n = max(n, len(g.Comparisons))
			}
		}
		rowH[r] = float64(n)*lineH + 2*pad + 4
	}
	s := &svgDoc{w: rowLabelW + float64(len(m.cols))*cellW + 2}
	// column headers, on up to two lines
	for c, col := range m.cols {
		x := rowLabelW + float64(c)*cellW + cellW/2
		parts := strings.SplitN(col.label, " · ", 2)
		y := headH - 8
		if len(parts) == 2 {
			s.text(x, headH-20, "middle", font, "#1d1d1f", "600", fitText(parts[0], font, cellW-6))
			s.text(x, y, "middle", 10, "#5f6368", "", fitText(parts[1], 10, cellW-6))
		} else {
			s.text(x, y, "middle", font, "#1d1d1f", "600", fitText(col.label, font, cellW-6))
		}
	}
	y := headH
	for r, row := range m.rows {
		s.text(rowLabelW-8, y+rowH[r]/2+4, "end", font, "#1d1d1f", "600", fitText(row, 1.12*font, rowLabelW-14))
		for c := range m.cols {
			x := rowLabelW + float64(c)*cellW
			g := m.cells[[2]int{r, c}]
			if g == nil {
				s.rect(x+2, y+2, cellW-4, rowH[r]-4, "#fafafb", ` stroke="#e4e4e8" stroke-dasharray="3 3"`)
				s.text(x+cellW/2, y+rowH[r]/2+4, "middle", 10, "#9a9aa0", "", "not measured")
				continue
			}
			s.raw(`<g class="mcell" data-group="%s">`, esc(g.Key))
			s.rect(x+2, y+2, cellW-4, rowH[r]-4, "#ffffff", ` stroke="#c9c9cf"`)
			for k, cmp := range displayOrder(g) {
				ly := y + pad + 2 + float64(k)*lineH
				bg := verdictColor(cmp)
				fg := textOnHex(bg)
				e, _ := effectOf(cmp)
				s.link("#"+ids[cmp], tooltip(g, cmp))
				s.rect(x+4, ly, cellW-8, lineH-2, bg, ` class="mline"`)
				s.text(x+8, ly+lineH-6, "start", font, fg, "600", cmp.A.Cell.Protocol+"–"+cmp.B.Cell.Protocol)
				s.text(x+cellW-31, ly+lineH-6, "end", font, fg, "", shortPct(e))
				s.text(x+cellW-7, ly+lineH-6, "end", font-1, fg, "700", mark(cmp))
				s.endLink()
			}
			s.raw(`</g>`)
		}
		y += rowH[r]
	}
	s.h = y + 2
	return s.html("fig matrix", "Verdict matrix: network scenarios by tests, one line per protocol comparison")
}

// forestSVG draws every protocol comparison's effect with its 95%
// interval on one log-ratio axis, grouped by test, the band of negligible
// differences shaded; each row links to its row in the test's comparison
// table.
func forestSVG(an *stats.Analysis, m *matrix, ids map[*stats.Comparison]string, band float64) template.HTML {
	const (
		rowH, headH, font = 17.0, 22.0, 11.0
		labelW, plotW     = 250.0, 470.0
		valueW            = 150.0
		top               = 26.0
	)
	type row struct {
		head  string
		g     *stats.Group
		c     *stats.Comparison
		label string
	}
	var rows []row
	var points, ends []float64
	for _, t := range an.Tests {
		var trs []row
		for _, g := range t.Groups {
			extra := ""
			if c, ok := m.colOf[g]; ok {
				if _, rest, ok := strings.Cut(m.cols[c].label, " · "); ok {
					extra = " · " + rest
				}
			}
			for _, c := range displayOrder(g) {
				e, ci := effectOf(c)
				points, ends = append(points, e), append(ends, ci.Lo, ci.Hi)
				trs = append(trs, row{g: g, c: c, label: g.Scenario + extra + " · " + pairName(c)})
			}
		}
		if len(trs) == 0 {
			continue
		}
		head := t.Name
		if len(t.Groups) > 0 {
			head += " — " + metricDesc(t.Groups[0].Cells[0].Cell)
		}
		rows = append(rows, row{head: head})
		rows = append(rows, trs...)
	}
	ax := newRatioAxis(points, ends, band, labelW+10, labelW+10+plotW)
	h := top
	for _, r := range rows {
		if r.head != "" {
			h += headH
		} else {
			h += rowH
		}
	}
	s := &svgDoc{w: labelW + 10 + plotW + 10 + valueW, h: h + 30}
	// the band and the axis
	bx0, _ := ax.pos(-band)
	bx1, _ := ax.pos(band)
	if band > 0 {
		s.rect(bx0, top-4, bx1-bx0, h-top+8, "#ececf0", "")
		s.text((bx0+bx1)/2, top-8, "middle", 10, "#5f6368", "", "negligible "+stats.BandText(band))
	}
	x0, _ := ax.pos(0)
	for _, tk := range ax.ticks(44) {
		x, _ := ax.pos(tk)
		s.line(x, top-4, x, h+4, "#e4e4e8", 1, "")
		s.text(x, h+16, "middle", 10, "#5f6368", "", tickText(tk))
		if len(rows) > 24 && math.Abs(x-(bx0+bx1)/2) > 60 {
			s.text(x, top-8, "middle", 10, "#5f6368", "", tickText(tk)) // a long plot: the scale on top too
		}
	}
	s.line(x0, top-4, x0, h+4, "#8a8a90", 1, "")
	s.text(labelW+10+plotW/2, h+28, "middle", 10, "#5f6368", "", "A vs B: Hodges-Lehmann effect in % of B's median, 95% CI (log scale)")
	y := top
	for i, r := range rows {
		if r.head != "" {
			s.text(4, y+headH-6, "start", font+0.5, "#1d1d1f", "700", fitText(r.head, font+0.5, labelW+plotW))
			s.line(4, y+headH-2, s.w-4, y+headH-2, "#9a9aa0", 0.8, "")
			y += headH
			continue
		}
		c := r.c
		s.link("#"+ids[c], tooltip(r.g, c))
		if i%2 == 0 {
			s.rect(0, y, s.w, rowH, "#f6f7f9", ` fill-opacity="0.7"`)
		} else {
			s.rect(0, y, s.w, rowH, "#ffffff", ` fill-opacity="0"`)
		}
		s.text(8, y+rowH-5, "start", font, "#1d1d1f", "", fitText(r.label, font, labelW-10))
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
		value := "–"
		if !math.IsNaN(e) && !math.IsInf(e, 0) {
			x, _ := ax.pos(e)
			fill := col
			if !ci.Valid() {
				fill = "#ffffff" // no interval: the difference of the medians, hollow
			}
			s.circle(x, cy, 3.6, fill, col)
			value = shortPct(e)
			if ci.Valid() {
				value += " [" + shortPct(ci.Lo) + ", " + shortPct(ci.Hi) + "]"
			}
		}
		if mk := mark(c); mk != "" {
			value += " " + mk
		}
		s.text(labelW+10+plotW+10, y+rowH-5, "start", 10, col, "", value)
		s.endLink()
		y += rowH
	}
	return s.html("fig forest", "Forest plot: every protocol comparison's effect with its 95% confidence interval, grouped by test")
}

// buildAnswer draws the first screen.
func buildAnswer(an *stats.Analysis, ids map[*stats.Comparison]string) *answerView {
	m := buildMatrix(an)
	av := &answerView{Rows: len(m.rows), Cols: len(m.cols), Size: len(m.cells)}
	band := math.Max(0, an.Config.MinEffect)
	if band > 0 {
		av.Band = stats.BandText(band)
	}
	if len(m.cells) == 0 {
		return av
	}
	av.Matrix = matrixSVG(m, ids)
	av.Forest = forestSVG(an, m, ids, band)
	css := func(c string) template.CSS { return template.CSS("background:" + c) }
	av.Legend = []legendItem{
		{Class: "quic", Text: "QUIC faster or better", Color: css("#b2182b")},
		{Class: "tcp", Text: "TCP faster or better", Color: css("#2166ac")},
		{Class: "a", Text: "one TCP protocol over another", Color: css("#5b3a86")},
		{Class: "ns", Text: "no significant difference", Color: css("#ffffff")},
	}
	if band > 0 {
		av.Legend = append(av.Legend,
			legendItem{Class: "neg", Mark: "≈", Text: "negligible (95% CI within " + av.Band + ")", Color: css("#dcdce2")},
			legendItem{Class: "quic", Mark: "(≈)", Text: "significant, possibly negligible (CI reaches into the band)", Color: css("#e8a0a8")})
	}
	av.Legend = append(av.Legend, legendItem{Class: "few", Mark: "?", Text: "too few samples for the design to decide", Color: css("#fff1c2")})
	return av
}

// textMatrix writes the matrix for the terminal: scenarios by tests, each
// cell listing its comparisons as "h3>h1" (h3 better), "h3>~h1" (better,
// possibly negligible), "h3≈h1" (negligible), "h3·h1" (no significant
// difference) or "h3?h1" (too few samples), with a legend.
func textMatrix(an *stats.Analysis) [][]string {
	m := buildMatrix(an)
	if len(m.cells) == 0 {
		return nil
	}
	head := []string{"NETWORK"}
	for _, c := range m.cols {
		head = append(head, termSafe(strings.ToUpper(c.label)))
	}
	rows := [][]string{head}
	for r, name := range m.rows {
		row := []string{termSafe(name)}
		for c := range m.cols {
			g := m.cells[[2]int{r, c}]
			if g == nil {
				row = append(row, "-")
				continue
			}
			var toks []string
			for _, cmp := range displayOrder(g) {
				toks = append(toks, termSafe(verdictToken(cmp)))
			}
			row = append(row, strings.Join(toks, " "))
		}
		rows = append(rows, row)
	}
	return rows
}

// verdictToken is one comparison in the text matrix.
func verdictToken(c *stats.Comparison) string {
	a, b := c.A.Cell.Protocol, c.B.Cell.Protocol
	switch {
	case c.Verdict == stats.Negligible:
		return a + "≈" + b
	case c.Verdict == stats.NoDifference:
		return a + "·" + b
	case c.Verdict == stats.Insufficient:
		return a + "?" + b
	}
	win, lose := a, b
	if c.Verdict == stats.BBetter {
		win, lose = b, a
	}
	if c.PossiblyNegligible() {
		return win + ">~" + lose
	}
	return win + ">" + lose
}
