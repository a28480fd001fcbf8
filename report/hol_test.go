package report

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// holDataset has one multiplex configuration whose protocols' transfers
// took different times: h2 30 bins of 10 ms, h3 20 bins, and h1 one bin
// (a transfer that ended within its first bin).
func holDataset(protos map[string]int) *model.Dataset {
	b := newBuilder(3)
	mux := cellSpec{scenario: "clean", test: "multiplex", factors: []model.Factor{{Name: "streams", Value: "2"}}, metric: "span", unit: "ms"}
	for _, proto := range []string{"h1", "h2", "h3"} {
		bins, ok := protos[proto]
		if !ok {
			continue
		}
		b.add(mux, proto, 3, func(int) float64 { return float64(bins * 10) }, func(s *model.Sample) {
			for st := range 2 {
				se := model.Series{Kind: model.SeriesHOL, Label: fmt.Sprintf("stream %d", st)}
				for bin := range bins {
					se.Points = append(se.Points, model.Point{T: int64(bin) * 10e6, V: 1000})
				}
				s.Timelines = append(s.Timelines, se)
			}
		})
	}
	return b.ds
}

func muxGroup(t *testing.T, ds *model.Dataset) *stats.Group {
	t.Helper()
	an, err := stats.Analyze(ds, stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tv := range an.Tests {
		for _, g := range tv.Groups {
			if g.Cells[0].Cell.Test == "multiplex" {
				return g
			}
		}
	}
	t.Fatal("no multiplex group")
	return nil
}

// The head-of-line panels of one configuration share one time axis, which
// ends where the longest transfer's last bin ends; legends name each
// stream once.
func TestHOLPanelsShareOneAxis(t *testing.T) {
	panels, xmax := holPanels(muxGroup(t, holDataset(map[string]int{"h1": 1, "h2": 30, "h3": 20})))
	if len(panels) != 3 {
		t.Fatalf("%d panels, want 3", len(panels))
	}
	if xmax != 300 {
		t.Errorf("shared axis ends at %v ms, want 300 (30 bins of 10 ms)", xmax)
	}
	ends := map[string]float64{}
	for _, p := range panels {
		proto := strings.Fields(p.title)[0]
		for _, l := range p.lines {
			if !strings.HasPrefix(l.name, "stream ") || strings.HasPrefix(l.name, "stream stream") {
				t.Errorf("%s: legend %q", proto, l.name)
			}
			ends[proto] = l.pts[len(l.pts)-1].X
		}
	}
	// each curve reaches its total at the end of its last bin (h1's one
	// bin has no spacing to measure, so it is drawn at its start)
	if ends["h2"] != 300 || ends["h3"] != 200 || ends["h1"] != 0 {
		t.Errorf("curve ends %v, want h1 0, h2 300, h3 200", ends)
	}
	for _, c := range mustHOLCharts(t, muxGroup(t, holDataset(map[string]int{"h1": 1, "h2": 30, "h3": 20}))) {
		if c.Err != "" {
			t.Errorf("%s: %s", c.Title, c.Err)
		}
	}
}

// A configuration whose only transfer ended within its first bin still
// gets an axis from 0, never one centred on 0 (-1 to 1).
func TestHOLSingleBinAxis(t *testing.T) {
	_, xmax := holPanels(muxGroup(t, holDataset(map[string]int{"h1": 1})))
	if xmax != holMinAxis {
		t.Errorf("axis ends at %v, want %v", xmax, holMinAxis)
	}
	for _, c := range mustHOLCharts(t, muxGroup(t, holDataset(map[string]int{"h1": 1}))) {
		if strings.Contains(string(c.SVG), ">-1<") {
			t.Errorf("%s: the time axis has a tick at -1", c.Title)
		}
	}
}

func mustHOLCharts(t *testing.T, g *stats.Group) []chart {
	t.Helper()
	cg, ok := holCharts(g)
	if !ok {
		t.Fatal("no head-of-line charts")
	}
	return cg.Charts
}

func TestStreamName(t *testing.T) {
	for in, want := range map[string]string{"stream 3": "stream 3", "3": "stream 3", "": "stream "} {
		if got := streamName(in); got != want {
			t.Errorf("streamName(%q) = %q, want %q", in, got, want)
		}
	}
}

// An adaptive run's stops are summarised in the terminal and listed in the
// HTML report.
func TestAdaptiveStopsShown(t *testing.T) {
	ds := holDataset(map[string]int{"h2": 3, "h3": 3})
	ds.Stops = []model.GroupStop{
		{Group: "clean/multiplex/streams=2/builtin/cubic", Iterations: 6, Reason: model.StopPrecision, Precision: 3.25, WorstPair: "h3 vs h2"},
		{Group: "lossy/multiplex/streams=2/builtin/cubic", Iterations: 40, Reason: model.StopMaximum, Precision: math.Inf(1), WorstPair: "h3 vs h2"},
	}
	var txt strings.Builder
	if err := Text(&txt, ds, goldenOpts()); err != nil {
		t.Fatal(err)
	}
	if want := "Adaptive iterations: 1 groups reached the precision target after 6 iterations, 1 stopped at the maximum (40 iterations) before reaching it."; !strings.Contains(txt.String(), want) {
		t.Errorf("terminal summary lacks %q:\n%s", want, txt.String())
	}
	html := string(renderHTML(t, ds, goldenOpts()))
	for _, want := range []string{"why each group stopped", "±3.25%", "maximum iterations reached first", "not computable"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if stopSummary(nil) != "" {
		t.Error("a run of fixed iterations gets an adaptive summary")
	}
}
