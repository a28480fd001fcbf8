package report

import (
	"fmt"
	"sort"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/quicbench/quicbench/competing"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/stats"
)

// shareRow is one protocol's line of a fairness shares table: the medians
// over its valid samples.
type shareRow struct {
	Config, Proto                       string
	Share, Measured, Competing, Jain, N string
}

// loadRow is one protocol's latency over an idle link and over the same
// link with competing traffic.
type loadRow struct {
	Config, Proto, Idle, Loaded, Growth string
}

// fairnessCharts draws, for the representative sample of each protocol
// of a fairness group, every flow's throughput over time.
func fairnessCharts(g *stats.Group) (chartGroup, bool) {
	if g.Test != plan.TestFairness {
		return chartGroup{}, false
	}
	cg := chartGroup{Title: "Fairness: throughput of each flow over time, " + g.Label()}
	for _, cs := range g.Cells {
		s := cs.Representative()
		if s == nil {
			continue
		}
		var lines []lineSeries
		for i, se := range seriesOf(s, competing.SeriesThroughput) {
			pts := make(plotter.XYs, len(se.Points))
			for k, p := range se.Points {
				pts[k] = plotter.XY{X: float64(p.T) / 1e9, Y: p.V}
			}
			lines = append(lines, lineSeries{name: se.Label, color: hexColor(categorical[i%len(categorical)]), pts: pts})
		}
		if len(lines) == 0 {
			continue
		}
		title := fmt.Sprintf("%s · iteration %d (median sample) · Jain %.3f", cs.Cell.Protocol, s.Iteration, s.Metrics["jain_index"])
		cg.Charts = append(cg.Charts, linesChartX(title, "", lines, "time (s)", "goodput (Mbit/s)", true, 0, vg.Points(330), vg.Points(220)))
	}
	return cg, len(cg.Charts) > 0
}

// shareRows is the table of shares per configuration of a fairness test.
func shareRows(t *stats.TestSet) []shareRow {
	var out []shareRow
	for _, g := range t.Groups {
		if g.Test != plan.TestFairness {
			continue
		}
		for _, cs := range g.Cells {
			med := func(name string) string {
				var v []float64
				for _, s := range cs.Samples {
					if x, ok := s.Metrics[name]; ok {
						v = append(v, x)
					}
				}
				if len(v) == 0 {
					return "–"
				}
				sort.Float64s(v)
				m := v[len(v)/2]
				if len(v)%2 == 0 {
					m = (v[len(v)/2-1] + v[len(v)/2]) / 2
				}
				return fmt.Sprintf("%.3g", m)
			}
			out = append(out, shareRow{Config: g.Label(), Proto: cs.Cell.Protocol, Share: med("share"),
				Measured: med("goodput_mbps"), Competing: med("competing_goodput_mbps"), Jain: med("jain_index"),
				N: fmt.Sprint(len(cs.Samples))})
		}
	}
	return out
}

// loadRows pairs every latency cell that ran with competing traffic with
// the cell of the same link, parameters and protocol without it.
func loadRows(t *stats.TestSet) []loadRow {
	type key struct{ up, down, params, proto, client, cc string }
	keyOf := func(c *model.Cell) key {
		var ps []string
		for _, f := range c.Factors {
			if f.Name != plan.FactorCompeting {
				ps = append(ps, f.Name+"="+f.Value)
			}
		}
		return key{c.LinkUp, c.LinkDown, strings.Join(ps, ","), c.Protocol, c.Client, c.CC}
	}
	idle := map[key]*stats.CellStats{}
	for _, g := range t.Groups {
		for _, cs := range g.Cells {
			if _, ok := cs.Cell.Factor(plan.FactorCompeting); !ok {
				idle[keyOf(cs.Cell)] = cs
			}
		}
	}
	var out []loadRow
	for _, g := range t.Groups {
		if g.Test != plan.TestLatency {
			continue
		}
		for _, cs := range g.Cells {
			comp, ok := cs.Cell.Factor(plan.FactorCompeting)
			base := idle[keyOf(cs.Cell)]
			if !ok || base == nil || cs.Summary.N == 0 || base.Summary.N == 0 {
				continue
			}
			a, b := base.Summary.Median, cs.Summary.Median
			out = append(out, loadRow{
				Config: fmt.Sprintf("%s (idle: %s) · competing %s", cs.Cell.Scenario, base.Cell.Scenario, comp),
				Proto:  cs.Cell.Protocol, Idle: fmt.Sprintf("%.1f", a), Loaded: fmt.Sprintf("%.1f", b),
				Growth: fmt.Sprintf("%+.1f ms (×%.2f)", b-a, b/a),
			})
		}
	}
	return out
}
