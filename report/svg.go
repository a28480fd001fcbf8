package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// svgDoc builds an SVG figure by hand, for the figures whose layout gonum/plot
// cannot give: rows of labelled marks that link to the report's tables
// (the verdict matrix, the forest plot, the implementations figure). Every
// text and attribute value it writes is escaped.
type svgDoc struct {
	b    strings.Builder
	w, h float64
}

// f formats a coordinate with at most one decimal.
func f(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

func esc(s string) string { return html.EscapeString(s) }

func (s *svgDoc) raw(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// rect draws a rectangle; extra is inserted as is (attributes the caller
// built from constants and escaped values).
func (s *svgDoc) rect(x, y, w, h float64, fill, extra string) {
	s.raw(`<rect x="%s" y="%s" width="%s" height="%s" fill="%s"%s/>`, f(x), f(y), f(math.Max(0, w)), f(math.Max(0, h)), fill, extra)
}

func (s *svgDoc) line(x1, y1, x2, y2 float64, stroke string, width float64, extra string) {
	s.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="%s"%s/>`, f(x1), f(y1), f(x2), f(y2), stroke, f(width), extra)
}

func (s *svgDoc) circle(x, y, r float64, fill, stroke string) {
	s.raw(`<circle cx="%s" cy="%s" r="%s" fill="%s" stroke="%s" stroke-width="1.2"/>`, f(x), f(y), f(r), fill, stroke)
}

// text writes one line of text; anchor is start, middle or end.
func (s *svgDoc) text(x, y float64, anchor string, size float64, fill, weight, txt string) {
	extra := ""
	if weight != "" {
		extra = ` font-weight="` + weight + `"`
	}
	s.raw(`<text x="%s" y="%s" text-anchor="%s" font-size="%s" fill="%s"%s>%s</text>`, f(x), f(y), anchor, f(size), fill, extra, esc(txt))
}

// link opens a hyperlink to a fragment of the report with a tooltip; the
// caller closes it with endLink.
func (s *svgDoc) link(href, title string) {
	s.raw(`<a href="%s"><title>%s</title>`, esc(href), esc(title))
}

func (s *svgDoc) endLink() { s.b.WriteString("</a>") }

// html wraps the content in an <svg> element of the document's size, with
// a class for the style sheet and an accessible label.
func (s *svgDoc) html(class, label string) template.HTML {
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" class="%s" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s">%s</svg>`,
		class, f(s.w), f(s.h), f(s.w), f(s.h), esc(label), s.b.String()))
}

// textWidth estimates the width of a text in the report's sans-serif font
// at size px: about 0.56 em per character.
func textWidth(txt string, size float64) float64 {
	return 0.56 * size * float64(len([]rune(txt)))
}

// fitText shortens txt with an ellipsis to fit width px at size.
func fitText(txt string, size, width float64) string {
	n := int(width / (0.56 * size))
	return truncate(txt, max(n, 4))
}

// ratioAxis maps a relative difference e (0.05 = +5%) to x on a log-ratio
// scale: x is linear in ln(1 + e), so -50% and +100% lie as far from 0.
// Values beyond the domain (and e <= -100%) are clamped to its ends.
type ratioAxis struct {
	lo, hi float64 // domain in ln(1 + e)
	x0, x1 float64 // pixels
}

// newRatioAxis spans the estimates points (NaN skipped, clamped to ratios
// from 1/50 to 50), the interval ends ends as far as ratios from 1/10 to
// 10 (an interval reaching beyond is drawn with an arrow), the band ±band
// and 0, with a little room on both sides.
func newRatioAxis(points, ends []float64, band, x0, x1 float64) ratioAxis {
	lo, hi := math.Log(1-math.Min(band, 0.5)), math.Log(1+band)
	lo, hi = math.Min(lo, -0.03), math.Max(hi, 0.03)
	span := func(vals []float64, lim float64) {
		for _, e := range vals {
			if math.IsNaN(e) {
				continue
			}
			l := -lim
			if 1+e > 0 {
				l = math.Max(-lim, math.Min(lim, math.Log(1+e)))
			}
			lo, hi = math.Min(lo, l), math.Max(hi, l)
		}
	}
	span(points, math.Log(50))
	span(ends, math.Log(10))
	pad := 0.04 * (hi - lo)
	return ratioAxis{lo: lo - pad, hi: hi + pad, x0: x0, x1: x1}
}

// pos returns the x of e and whether e had to be clamped.
func (a ratioAxis) pos(e float64) (float64, bool) {
	l := math.Inf(-1)
	if 1+e > 0 {
		l = math.Log(1 + e)
	}
	clamped := false
	if l < a.lo {
		l, clamped = a.lo, true
	} else if l > a.hi {
		l, clamped = a.hi, true
	}
	return a.x0 + (l-a.lo)/(a.hi-a.lo)*(a.x1-a.x0), clamped
}

// ticks returns the relative differences to label, from a list of round
// ratios, at least minGap px apart (0 always).
func (a ratioAxis) ticks(minGap float64) []float64 {
	ratios := []float64{0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 0.95, 1.05, 1.1, 1.25, 1.5, 2, 3, 5, 10, 20, 50}
	out := []float64{0}
	x0, _ := a.pos(0)
	// outward from 0 on each side
	last := x0
	for i := len(ratios) - 1; i >= 0; i-- {
		r := ratios[i]
		if r >= 1 || math.Log(r) < a.lo {
			continue
		}
		if x, _ := a.pos(r - 1); last-x >= minGap {
			out = append(out, r-1)
			last = x
		}
	}
	last = x0
	for _, r := range ratios {
		if r <= 1 || math.Log(r) > a.hi {
			continue
		}
		if x, _ := a.pos(r - 1); x-last >= minGap {
			out = append(out, r-1)
			last = x
		}
	}
	return out
}

// tickText labels a relative difference on a ratio axis: "0", "−50%",
// "+100%", "×10" from ten-fold on.
func tickText(e float64) string {
	switch {
	case e == 0:
		return "0"
	case 1+e >= 10:
		return "×" + strconv.FormatFloat(1+e, 'g', 3, 64)
	}
	return strings.Replace(fmt.Sprintf("%+.0f%%", 100*e), "-", "−", 1)
}

// shortPct formats a relative difference for a figure: "+0.9%", "−32%".
func shortPct(e float64) string {
	if math.IsNaN(e) || math.IsInf(e, 0) {
		return "–"
	}
	s := fmt.Sprintf("%+.0f%%", 100*e)
	if math.Abs(e) < 0.1 {
		s = fmt.Sprintf("%+.1f%%", 100*e)
	}
	return strings.Replace(s, "-", "−", 1)
}
