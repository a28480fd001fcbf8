package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/quicbench/quicbench/stats"
)

// chart is one rendered figure.
type chart struct {
	Title   string
	Caption string
	SVG     template.HTML
	Err     string // set instead of SVG when the chart could not be drawn
}

// Protocol colours: QUIC protocols in warm colours, TCP protocols in blues,
// matching the heatmaps (red = QUIC better, blue = TCP better).
var protoHex = map[string]string{
	"h1":   "#6baed6",
	"h1c":  "#9ecae1",
	"h2":   "#2171b5",
	"tcp":  "#08306b",
	"h3":   "#d62728",
	"quic": "#fd8d3c",
}

// extra colours for unknown protocols, runs and streams (Tableau 10).
var categorical = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

func protoColorHex(p string) string {
	if h, ok := protoHex[p]; ok {
		return h
	}
	var sum int
	for _, r := range p {
		sum += int(r)
	}
	return categorical[sum%len(categorical)]
}

func hexColor(h string) color.Color {
	var r, g, b uint8
	fmt.Sscanf(h, "#%02x%02x%02x", &r, &g, &b)
	return color.RGBA{R: r, G: g, B: b, A: 255}
}

func protoColor(p string) color.Color { return hexColor(protoColorHex(p)) }

var (
	sans      = font.Font{Typeface: "Liberation", Variant: "Sans"}
	gridColor = color.Gray{Y: 225}
)

// newPlot returns a plot with the report's fonts and a light grid.
func newPlot(xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.TextStyle.Font = font.From(sans, 11)
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, 10)
		ax.Tick.Label.Font = font.From(sans, 9)
	}
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{}, niceTicks{}
	p.Legend.TextStyle.Font = font.From(sans, 9)
	p.Legend.ThumbnailWidth = vg.Points(16)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = gridColor, gridColor
	p.Add(g)
	return p
}

// render draws p as an SVG element of w x h points. gonum/plot panics on
// some degenerate inputs; such a panic becomes an error naming the chart.
func render(p *plot.Plot, w, h vg.Length) (svg template.HTML, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("drawing failed: %v", r)
		}
	}()
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", err
	}
	out := buf.Bytes()
	// drop the XML prolog and comment: the SVG is inlined in HTML
	if i := bytes.Index(out, []byte("<svg")); i > 0 {
		out = out[i:]
	}
	// The text is escaped by vgsvg (html.EscapeString) and every other
	// attribute is generated from numbers and colours.
	return template.HTML(out), nil
}

func finish(title, caption string, p *plot.Plot, w, h vg.Length) chart {
	svg, err := render(p, w, h)
	if err != nil {
		return chart{Title: title, Caption: caption, Err: err.Error()}
	}
	return chart{Title: title, Caption: caption, SVG: svg}
}

// niceTicks are gonum's default ticks with labels printed with just the
// decimals their spacing needs ("250", not "250.00").
type niceTicks struct{}

// Ticks implements plot.Ticker.
func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	step := math.Inf(1)
	prev := math.NaN()
	for _, t := range ts {
		if t.Label == "" {
			continue
		}
		if !math.IsNaN(prev) {
			step = math.Min(step, t.Value-prev)
		}
		prev = t.Value
	}
	dec := 0
	if step > 0 && !math.IsInf(step, 1) {
		for dec < 8 {
			scaled := step * math.Pow10(dec)
			if math.Abs(scaled-math.Round(scaled)) < 1e-6*scaled {
				break
			}
			dec++
		}
	}
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value+0, 'f', dec, 64)
			if strings.Trim(ts[i].Label, "-0.") == "" {
				ts[i].Label = strings.TrimPrefix(ts[i].Label, "-")
			}
		}
	}
	return ts
}

func clamp(v, lo, hi vg.Length) vg.Length { return max(lo, min(hi, v)) }

// logTicks labels a logarithmic axis at 1, 2 and 5 times the powers of ten
// within it (every integer multiple when that gives fewer than three), so
// that an axis spanning less than a decade still has labelled ticks.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	gen := func(mults []float64) []plot.Tick {
		var ts []plot.Tick
		for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
			for _, m := range mults {
				v := m * math.Pow(10, e)
				if v >= lo*(1-1e-9) && v <= hi*(1+1e-9) {
					ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 4, 64)})
				}
			}
		}
		return ts
	}
	ts := gen([]float64{1, 2, 5})
	if len(ts) < 3 {
		ts = gen([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9})
	}
	if len(ts) == 0 { // no round value within: the ends
		for _, v := range []float64{lo, hi} {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 3, 64)})
		}
	}
	return ts
}

// barChart draws grouped bars of means with CI whiskers and median marks.
func barChart(title, caption string, cats []string, series []barSeries, ylabel string) chart {
	return barChartW(title, caption, cats, series, ylabel, clamp(vg.Points(float64(110+len(cats)*(40+22*len(series)))), 300, 720))
}

// barChartW is barChart at width w. Where the bars' values span more than
// ten-fold, the y axis is logarithmic (the bars then start at its foot),
// so that no bar is drawn as nothing.
func barChartW(title, caption string, cats []string, series []barSeries, ylabel string, w vg.Length) chart {
	p := newPlot("", ylabel)
	b := &barsCI{series: series, ncat: len(cats)}
	p.Add(b)
	if lo, hi := barSpan(series); lo > 0 && hi/lo > 10 {
		for _, s := range series {
			for i := range s.lo {
				if s.lo[i] > 0 {
					lo = math.Min(lo, s.lo[i])
				}
				hi = math.Max(hi, s.hi[i])
			}
		}
		b.base = lo / 1.5
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
		p.Y.Min, p.Y.Max = b.base, hi*1.2
		p.Y.Label.Text += " (log scale)"
	}
	p.NominalX(cats...)
	p.X.Tick.Label.Font = font.From(sans, 8)
	lines := 1
	for _, c := range cats {
		lines = max(lines, strings.Count(c, "\n")+1)
	}
	h := vg.Points(float64(220 + 10*lines))
	return finish(title, caption, p, w, h)
}

// cdfSeries is one empirical distribution.
type cdfSeries struct {
	name   string
	color  color.Color
	dashes []vg.Length
	sorted []float64
}

// cdfPoints returns the step points of the empirical CDF of sorted values,
// at most limit points (quantiles) for large samples.
func cdfPoints(s []float64, limit int) plotter.XYs {
	n := len(s)
	if n == 0 {
		return nil
	}
	if n <= limit {
		pts := make(plotter.XYs, 0, n+1)
		pts = append(pts, plotter.XY{X: s[0], Y: 0})
		for i, v := range s {
			pts = append(pts, plotter.XY{X: v, Y: float64(i+1) / float64(n)})
		}
		return pts
	}
	pts := make(plotter.XYs, 0, limit+1)
	pts = append(pts, plotter.XY{X: s[0], Y: 0})
	for k := 1; k <= limit; k++ {
		q := float64(k) / float64(limit)
		pts = append(pts, plotter.XY{X: stats.QuantileSorted(s, q), Y: q})
	}
	return pts
}

// cdfChart draws empirical CDFs as step lines.
// The series' colours are explained by the HTML around the chart, so the
// plot carries no legend.
func cdfChart(title, caption string, series []cdfSeries, xlabel string, w, h vg.Length) chart {
	p := newPlot(xlabel, "fraction of samples")
	p.Y.Min, p.Y.Max = 0, 1
	for _, s := range series {
		pts := cdfPoints(s.sorted, 400)
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			continue
		}
		l.StepStyle = plotter.PostStep
		l.LineStyle = draw.LineStyle{Color: s.color, Width: vg.Points(1.6), Dashes: s.dashes}
		p.Add(l)
	}
	return finish(title, caption, p, w, h)
}

// lineSeries is one polyline of a timeline chart.
type lineSeries struct {
	name   string
	color  color.Color
	dashes []vg.Length
	pts    plotter.XYs
	points bool // draw a dot at each point
}

// linesChart draws timelines; with legend, the legend sits at the top left
// and the y axis gets headroom for it.
func linesChart(title, caption string, series []lineSeries, xlabel, ylabel string, legend bool, w, h vg.Length) chart {
	return linesChartX(title, caption, series, xlabel, ylabel, legend, 0, w, h)
}

// linesChartX is linesChart with the x axis drawn from 0 to xmax when xmax
// is positive, so that panels meant to be read side by side share one
// time axis.
func linesChartX(title, caption string, series []lineSeries, xlabel, ylabel string, legend bool, xmax float64, w, h vg.Length) chart {
	p := newPlot(xlabel, ylabel)
	if xmax > 0 {
		p.X.Min, p.X.Max = 0, xmax
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(4)
	ymax := math.Inf(-1)
	entries := 0
	for _, s := range series {
		if len(s.pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.pts)
		if err != nil {
			continue
		}
		l.LineStyle = draw.LineStyle{Color: s.color, Width: vg.Points(1.3), Dashes: s.dashes}
		p.Add(l)
		for _, pt := range s.pts {
			ymax = math.Max(ymax, pt.Y)
		}
		if s.points {
			sc, err := plotter.NewScatter(s.pts)
			if err == nil {
				sc.GlyphStyle = draw.GlyphStyle{Color: s.color, Radius: vg.Points(1.6), Shape: draw.CircleGlyph{}}
				p.Add(sc)
			}
		}
		if legend {
			p.Legend.Add(s.name, l)
			entries++
		}
	}
	if p.Y.Min > 0 {
		p.Y.Min = 0
	}
	if entries > 0 && ymax > 0 {
		// room above the data for the legend's lines
		p.Y.Max = ymax * (1 + 0.09*float64(entries) + 0.05)
	}
	return finish(title, caption, p, w, h)
}

// heatmapChart draws a labelled grid over two nominal axes.
func heatmapChart(title, caption, xname string, xvals []string, yname string, yvals []string, cells []heatCell) chart {
	p := newPlot(xname, yname)
	p.Add(&heatCells{cells: cells, nx: len(xvals), ny: len(yvals), font: font.From(sans, 9)})
	p.NominalX(xvals...)
	p.NominalY(yvals...)
	w := clamp(vg.Points(float64(110+62*len(xvals))), 260, 640)
	h := clamp(vg.Points(float64(70+30*len(yvals))), 140, 480)
	return finish(title, caption, p, w, h)
}

// heatColor maps a comparison to a colour: red shades where QUIC is
// significantly better, blue where TCP is, white where not significant; the
// shade deepens with |ln(median A / median B)|, saturating at a 2x ratio.
func heatColor(c *stats.Comparison) color.Color {
	ratio := c.A.Summary.Median / c.B.Summary.Median
	t := 0.0
	if ratio > 0 && !math.IsInf(ratio, 0) {
		t = math.Min(1, math.Abs(math.Log(ratio))/math.Ln2)
	}
	mix := func(to color.RGBA) color.Color {
		f := 0.2 + 0.8*t
		m := func(a uint8) uint8 { return uint8(math.Round(255 - f*(255-float64(a)))) }
		return color.RGBA{R: m(to.R), G: m(to.G), B: m(to.B), A: 255}
	}
	switch c.Verdict {
	case stats.ABetter:
		return mix(color.RGBA{R: 178, G: 24, B: 43, A: 255})
	case stats.BBetter:
		return mix(color.RGBA{R: 33, G: 102, B: 172, A: 255})
	case stats.Insufficient:
		return color.Gray{Y: 235}
	case stats.Negligible:
		return color.RGBA{R: 220, G: 220, B: 226, A: 255}
	}
	return color.White
}

// waterfallChart draws one bar per resource (waiting and receiving) on an
// axis from 0 to at least xmax ms, so that the waterfalls of one
// configuration share a scale.
func waterfallChart(title, caption string, names []string, spans []span, xmax float64) chart {
	p := newPlot("time since start (ms)", "")
	p.Add(&waterfall{spans: spans, wait: hexColor("#c6dbef"), receive: hexColor("#2171b5")})
	labels := make([]string, len(names))
	for i, n := range names {
		labels[len(names)-1-i] = truncate(n, 36)
	}
	p.NominalY(labels...)
	p.Y.Tick.Label.Font = font.From(sans, 7.5)
	p.X.Min = 0
	p.X.Max = math.Max(p.X.Max, xmax)
	h := vg.Points(float64(60 + 11*len(names)))
	return finish(title, caption, p, vg.Points(430), h)
}

// hexList lists the protocol colour legend for the HTML.
func swatches(protos []string) []swatchView {
	out := make([]swatchView, 0, len(protos))
	for _, p := range protos {
		out = append(out, swatchView{Name: p, Color: template.CSS("background:" + protoColorHex(p))})
	}
	return out
}

type swatchView struct {
	Name  string
	Color template.CSS
}

// sortedCopy returns an ascending copy of v.
func sortedCopy(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}
