package report

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// This file holds the gonum/plot plotters that the standard set lacks: bars
// with confidence-interval whiskers and median marks placed in data
// coordinates, labelled heatmap cells with an arbitrary colour per cell, and
// the horizontal spans of a resource waterfall.

// barSeries is one series (protocol or run) of a grouped bar chart; slices
// are indexed by category and hold NaN where the series has no value.
type barSeries struct {
	name                 string
	color                color.Color
	mean, lo, hi, median []float64
}

// barsCI draws grouped bars (height = mean) with 95% CI whiskers and a
// median mark, categories at x = 0, 1, 2...
type barsCI struct {
	series []barSeries
	ncat   int
	base   float64 // where the bars start: 0, or the foot of a log axis
}

func (b *barsCI) slot(cat, k int) (x0, x1 float64) {
	const group = 0.8
	w := group / float64(len(b.series))
	x0 = float64(cat) - group/2 + float64(k)*w
	return x0 + 0.06*w, x0 + 0.94*w
}

// Plot implements plot.Plotter.
func (b *barsCI) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	whisker := draw.LineStyle{Color: color.Black, Width: vg.Points(0.8)}
	med := draw.LineStyle{Color: color.Black, Width: vg.Points(2)}
	for k, s := range b.series {
		for i := 0; i < b.ncat; i++ {
			if math.IsNaN(s.mean[i]) {
				continue
			}
			x0, x1 := b.slot(i, k)
			X0, X1 := trX(x0), trX(x1)
			Y0, Y1 := trY(b.base), trY(s.mean[i])
			c.FillPolygon(s.color, c.ClipPolygonY([]vg.Point{{X: X0, Y: Y0}, {X: X0, Y: Y1}, {X: X1, Y: Y1}, {X: X1, Y: Y0}}))
			xm := (X0 + X1) / 2
			if !math.IsNaN(s.lo[i]) {
				cap := (X1 - X0) / 4
				lo, hi := trY(math.Max(s.lo[i], b.base)), trY(s.hi[i])
				c.StrokeLines(whisker, c.ClipLinesY([]vg.Point{{X: xm, Y: lo}, {X: xm, Y: hi}})...)
				c.StrokeLines(whisker, c.ClipLinesY([]vg.Point{{X: xm - cap, Y: lo}, {X: xm + cap, Y: lo}})...)
				c.StrokeLines(whisker, c.ClipLinesY([]vg.Point{{X: xm - cap, Y: hi}, {X: xm + cap, Y: hi}})...)
			}
			if !math.IsNaN(s.median[i]) {
				ym := trY(s.median[i])
				c.StrokeLines(med, c.ClipLinesY([]vg.Point{{X: X0, Y: ym}, {X: X1, Y: ym}})...)
			}
		}
	}
}

// DataRange implements plot.DataRanger.
func (b *barsCI) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = b.base, b.base
	for _, s := range b.series {
		for i := 0; i < b.ncat; i++ {
			for _, v := range []float64{s.mean[i], s.lo[i], s.hi[i], s.median[i]} {
				if !math.IsNaN(v) {
					ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
				}
			}
		}
	}
	if ymax == ymin {
		ymax = ymin + 1
	}
	return -0.5, float64(b.ncat) - 0.5, ymin, ymax * 1.04
}

// heatCell is one cell of a heatmap.
type heatCell struct {
	x, y  int
	color color.Color
	label string
}

// heatCells draws coloured, labelled unit squares centred on integer
// coordinates (nominal axes).
type heatCells struct {
	cells  []heatCell
	nx, ny int
	font   font.Font
}

// Plot implements plot.Plotter.
func (h *heatCells) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	border := draw.LineStyle{Color: color.Gray{Y: 200}, Width: vg.Points(0.5)}
	for _, cell := range h.cells {
		x0, x1 := trX(float64(cell.x)-0.5), trX(float64(cell.x)+0.5)
		y0, y1 := trY(float64(cell.y)-0.5), trY(float64(cell.y)+0.5)
		pts := []vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}
		c.FillPolygon(cell.color, pts)
		c.StrokeLines(border, append(pts, pts[0]))
		sty := text.Style{Color: textOn(cell.color), Font: h.font, XAlign: draw.XCenter, YAlign: draw.YCenter, Handler: plt.TextHandler}
		c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: (y0 + y1) / 2}, cell.label)
	}
}

// DataRange implements plot.DataRanger.
func (h *heatCells) DataRange() (xmin, xmax, ymin, ymax float64) {
	return -0.5, float64(h.nx) - 0.5, -0.5, float64(h.ny) - 0.5
}

// textOn returns black or white, whichever reads better on bg.
func textOn(bg color.Color) color.Color {
	r, g, b, _ := bg.RGBA()
	lum := (0.299*float64(r) + 0.587*float64(g) + 0.114*float64(b)) / 65535
	if lum < 0.5 {
		return color.White
	}
	return color.Black
}

// span is one resource of a waterfall: waiting from start to ttfb,
// receiving from ttfb to end (milliseconds).
type span struct {
	start, ttfb, end float64
}

// waterfall draws one horizontal bar per resource, the first at the top
// (resource i at y = n-1-i).
type waterfall struct {
	spans         []span
	wait, receive color.Color
}

// Plot implements plot.Plotter.
func (w *waterfall) Plot(c draw.Canvas, plt *plot.Plot) {
	trX, trY := plt.Transforms(&c)
	n := len(w.spans)
	for i, s := range w.spans {
		y := float64(n - 1 - i)
		y0, y1 := trY(y-0.35), trY(y+0.35)
		box := func(a, b float64, col color.Color) {
			if b <= a {
				return
			}
			x0, x1 := trX(a), trX(b)
			c.FillPolygon(col, c.ClipPolygonX([]vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}))
		}
		box(s.start, s.ttfb, w.wait)
		box(s.ttfb, s.end, w.receive)
	}
}

// DataRange implements plot.DataRanger.
func (w *waterfall) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = 0, 0
	for _, s := range w.spans {
		xmax = math.Max(xmax, s.end)
	}
	if xmax == 0 {
		xmax = 1
	}
	return xmin, xmax, -0.5, float64(len(w.spans)) - 0.5
}
