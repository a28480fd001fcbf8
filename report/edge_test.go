package report

import (
	"bytes"
	"image/color"
	"math"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

func TestDegenerateDatasets(t *testing.T) {
	allFailed := newBuilder(3)
	spec := cellSpec{scenario: "blackout", test: "download", metric: "time", unit: "ms"}
	allFailed.add(spec, "h2", 5, func(int) float64 { return math.NaN() }, nil)
	allFailed.add(spec, "h3", 5, func(i int) float64 { return 100 + float64(i) }, nil)

	single := newBuilder(4)
	single.add(cellSpec{scenario: "baseline", test: "ttfb", metric: "ttfb", unit: "ms"}, "h3", 6, func(i int) float64 { return 30 + float64(i) }, nil)

	constant := newBuilder(5)
	cspec := cellSpec{scenario: "flat", test: "latency", metric: "rtt", unit: "ms"}
	// 8 pairs: enough for the design to reach 0.05 (4 would be too few)
	constant.add(cspec, "h2", 8, func(int) float64 { return 10 }, nil)
	constant.add(cspec, "h3", 8, func(int) float64 { return 10 }, nil)

	nonFinite := newBuilder(6)
	nspec := cellSpec{scenario: "odd", test: "download", metric: "time", unit: "ms"}
	nonFinite.add(nspec, "h2", 4, func(i int) float64 { return 50 }, func(s *model.Sample) {
		if s.Iteration == 1 {
			s.Value = math.Inf(1)
		}
	})
	nonFinite.add(nspec, "h3", 4, func(i int) float64 { return 40 }, nil)

	for name, ds := range map[string]*model.Dataset{
		"empty":      {},
		"all failed": allFailed.ds,
		"single":     single.ds,
		"constant":   constant.ds,
		"non-finite": nonFinite.ds,
	} {
		t.Run(name, func(t *testing.T) {
			var h, txt bytes.Buffer
			if err := HTML(&h, ds, Options{}); err != nil {
				t.Fatal(err)
			}
			if err := Text(&txt, ds, Options{}); err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(h.Bytes(), []byte("could not be drawn")) {
				t.Error("a chart failed to draw")
			}
			switch name {
			case "all failed":
				if !strings.Contains(txt.String(), "too few samples") {
					t.Errorf("a cell without valid samples is not reported as too few:\n%s", txt.String())
				}
			case "single":
				if !strings.Contains(h.String(), "No comparisons") {
					t.Error("single-protocol run does not say there is nothing to compare")
				}
			case "constant":
				if !strings.Contains(txt.String(), "no significant difference") {
					t.Errorf("identical constant samples:\n%s", txt.String())
				}
			case "non-finite":
				if !strings.Contains(txt.String(), "invalid: value is +Inf ×1 (iteration 1)") || !strings.Contains(h.String(), "invalid: value is &#43;Inf ×1 (iteration 1)") {
					t.Error("a non-finite value is not listed as invalid")
				}
			}
		})
	}
}

func TestHeatColor(t *testing.T) {
	mk := func(ma, mb float64, v stats.Verdict) *stats.Comparison {
		return &stats.Comparison{Verdict: v,
			A: &stats.CellStats{Summary: stats.Summary{Median: ma}}, B: &stats.CellStats{Summary: stats.Summary{Median: mb}}}
	}
	rgb := func(c color.Color) (r, g, b uint32) { r, g, b, _ = c.RGBA(); return r >> 8, g >> 8, b >> 8 }
	if r, g, b := rgb(heatColor(mk(50, 100, stats.ABetter))); !(r > g && r > b) {
		t.Errorf("QUIC better is not red: %d,%d,%d", r, g, b)
	}
	if r, g, b := rgb(heatColor(mk(100, 50, stats.BBetter))); !(b > r && b > g) {
		t.Errorf("TCP better is not blue: %d,%d,%d", r, g, b)
	}
	if r, g, b := rgb(heatColor(mk(60, 100, stats.NoDifference))); r != 255 || g != 255 || b != 255 {
		t.Errorf("not significant is not white: %d,%d,%d", r, g, b)
	}
	// deeper for a larger ratio, saturating at 2x
	_, g1, _ := rgb(heatColor(mk(90, 100, stats.ABetter)))
	_, g2, _ := rgb(heatColor(mk(50, 100, stats.ABetter)))
	_, g3, _ := rgb(heatColor(mk(10, 100, stats.ABetter)))
	if !(g1 > g2) || g2 != g3 {
		t.Errorf("shades: 10%% %d, 2x %d, 10x %d: want deeper then saturated", g1, g2, g3)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 1000, []string{"0", "500", "1000"}},
		{0, 1, []string{"0.0", "0.5", "1.0"}},
		{0.001, 0.004, []string{"0.001", "0.002", "0.003", "0.004"}},
		{-20, 20, []string{"-20", "0", "20"}},
	} {
		var got []string
		for _, tk := range (niceTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("ticks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

// failuresDataset has one download over a lossy link where h2 times out
// in 6 of 30 iterations and h3 never; h3 is 1% slower on the others.
func failuresDataset() *model.Dataset {
	b := newBuilder(7)
	spec := cellSpec{scenario: "loss-5", test: "download", metric: "time", unit: "ms"}
	b.add(spec, "h2", 30, func(i int) float64 {
		if i%5 == 0 {
			return math.NaN()
		}
		return 100 + float64(i%6)
	}, nil)
	b.add(spec, "h3", 30, func(i int) float64 { return 101 + float64(i%6) }, nil)
	return b.ds
}

// A protocol that times out far more often than the other: the verdict
// carries it, and the variant with failures ranked worst stands beside it
// in the terminal summary and the HTML report.
func TestFailureAwareVerdict(t *testing.T) {
	b := &builder{ds: failuresDataset()}
	// h3 is 1% slower on every completed pair: negligible with the default
	// band, which would hide the test's verdict this test is about
	opts := Options{Stats: stats.Config{MinEffect: -1}}
	var h, txt bytes.Buffer
	if err := HTML(&h, b.ds, opts); err != nil {
		t.Fatal(err)
	}
	if err := Text(&txt, b.ds, opts); err != nil {
		t.Fatal(err)
	}
	note := "h2 timed out 6 of 30, h3 0 of 30 (Fisher p 0.024)"
	for _, want := range []string{"TCP faster; " + note, "failures as worst", "signed-rank exact, 30 pairs", "no significant difference", "download (1)"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text summary lacks %q:\n%s", want, txt.String())
		}
	}
	for _, want := range []string{`<td class="v tcp" data-l="Verdict">TCP faster<div class="vnote">` + note, "with failures as worst: no significant difference (signed-rank exact, 30 pairs"} {
		if !strings.Contains(h.String(), want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
}
