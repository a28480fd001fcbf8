package report

import (
	"bytes"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// answerDataset: download of two sizes over two networks, and a page
// loaded by the built-in client on both networks and by Chromium on one.
// h3 is 30% faster under loss, everything else within 1%.
func answerDataset() *model.Dataset {
	b := newBuilder(11)
	for _, sc := range []string{"clean", "lossy"} {
		for _, size := range []string{"1MB", "10MB"} {
			spec := cellSpec{scenario: sc, test: "download", factors: []model.Factor{{Name: "size", Value: size}}, metric: "time", unit: "ms"}
			for _, p := range []string{"h2", "h3"} {
				f := 1.0
				if sc == "lossy" && p == "h3" {
					f = 0.7
				}
				b.add(spec, p, 12, func(i int) float64 { return 200 * f * (1 + 0.2*math.Sin(float64(i))) }, nil)
			}
		}
		clients := []string{model.ClientBuiltin}
		if sc == "lossy" {
			clients = append(clients, "chromium")
		}
		for _, cl := range clients {
			spec := cellSpec{scenario: sc, test: "page", factors: []model.Factor{{Name: "objects", Value: "10"}}, metric: "plt", unit: "ms", client: cl}
			for k, p := range []string{"h1", "h2", "h3"} {
				b.add(spec, p, 12, func(i int) float64 { return (100 + float64(k)) * (1 + 0.2*math.Sin(float64(i))) }, nil)
			}
		}
	}
	return b.ds
}

func TestVerdictMatrix(t *testing.T) {
	ds := answerDataset()
	an, err := stats.Analyze(ds, Options{}.withDefaults(ds).Stats)
	if err != nil {
		t.Fatal(err)
	}
	m := buildMatrix(an)
	var labels []string
	for _, c := range m.cols {
		labels = append(labels, c.label)
	}
	want := []string{"download · size=1MB", "download · size=10MB", "page", "page · chromium"}
	if strings.Join(labels, "|") != strings.Join(want, "|") || strings.Join(m.rows, "|") != "clean|lossy" {
		t.Fatalf("columns %q rows %q; want %q, clean|lossy", labels, m.rows, want)
	}
	if len(m.cells) != len(an.Groups) || m.cells[[2]int{0, 3}] != nil {
		t.Errorf("%d cells for %d groups; clean page in Chromium: %v", len(m.cells), len(an.Groups), m.cells[[2]int{0, 3}])
	}
	// text: h3 better under loss; the page's 1% steps are negligible
	rows := textMatrix(an)
	if got := strings.Join(rows[2], " | "); got != "lossy | h3>h2 | h3>h2 | h3≈h1 h3≈h2 h2≈h1 | h3≈h1 h3≈h2 h2≈h1" {
		t.Errorf("lossy row %q", got)
	}
	if rows[1][4] != "-" || rows[1][3] == "-" {
		t.Errorf("clean row %q: the Chromium page was not measured there", rows[1])
	}
	var buf bytes.Buffer
	if err := Text(&buf, ds, Options{}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if i, j := strings.Index(out, "NETWORK"), strings.Index(out, "TEST "); i < 0 || j < i {
		t.Errorf("the text summary does not open with the matrix:\n%s", out)
	}
	// the HTML: one matrix cell per group, the forest's rows one per comparison
	html := string(renderHTML(t, ds, Options{}))
	if n := strings.Count(html, `<g class="mcell"`); n != len(an.Groups) {
		t.Errorf("%d matrix cells, want %d", n, len(an.Groups))
	}
	forest := html[strings.Index(html, `class="fig forest"`):]
	forest = forest[:strings.Index(forest, "</svg>")]
	if n := len(regexp.MustCompile(`<a href="#cmp-`).FindAllString(forest, -1)); n != len(an.Comparisons) {
		t.Errorf("%d forest rows, want %d", n, len(an.Comparisons))
	}
}

func TestVerdictTokens(t *testing.T) {
	cell := func(p string) *stats.CellStats { return &stats.CellStats{Cell: &model.Cell{Protocol: p}} }
	c := &stats.Comparison{A: cell("h3"), B: cell("h2")}
	for _, tt := range []struct {
		v     stats.Verdict
		class stats.Practical
		want  string
	}{
		{stats.ABetter, stats.Outside, "h3>h2"},
		{stats.BBetter, stats.Outside, "h2>h3"},
		{stats.BBetter, stats.Crosses, "h2>~h3"},
		{stats.Negligible, stats.Inside, "h3≈h2"},
		{stats.NoDifference, stats.Crosses, "h3·h2"},
		{stats.Insufficient, stats.PracticalUnknown, "h3?h2"},
	} {
		c.Verdict, c.Effect.Class = tt.v, tt.class
		if got := verdictToken(c); got != tt.want {
			t.Errorf("%v %v: %q, want %q", tt.v, tt.class, got, tt.want)
		}
	}
}

func TestRatioAxis(t *testing.T) {
	ax := newRatioAxis([]float64{-0.5, 1}, []float64{-0.99, 30}, 0.05, 0, 100)
	x0, _ := ax.pos(0)
	xm, _ := ax.pos(-0.5)
	xp, _ := ax.pos(1)
	if math.Abs((x0-xm)-(xp-x0)) > 1e-9 {
		t.Errorf("-50%% and +100%% are not as far from 0: %v %v %v", xm, x0, xp)
	}
	// interval ends beyond ten-fold are clamped, not stretching the axis
	if x, clamped := ax.pos(30); !clamped || x != 100 {
		t.Errorf("+3000%%: x %v clamped %v", x, clamped)
	}
	if x, clamped := ax.pos(-1.5); !clamped || x != 0 {
		t.Errorf("-150%%: x %v clamped %v", x, clamped)
	}
	ticks := ax.ticks(10)
	if len(ticks) < 3 || ticks[0] != 0 {
		t.Errorf("ticks %v", ticks)
	}
	if tickText(-0.5) != "−50%" || tickText(9) != "×10" || shortPct(0.009) != "+0.9%" {
		t.Errorf("labels %q %q %q", tickText(-0.5), tickText(9), shortPct(0.009))
	}
}

func TestLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks{}).Ticks(30, 500) {
		labels = append(labels, tk.Label)
	}
	if strings.Join(labels, " ") != "50 100 200 500" {
		t.Errorf("ticks of [30, 500]: %q", labels)
	}
	labels = nil
	for _, tk := range (logTicks{}).Ticks(110, 190) {
		labels = append(labels, tk.Label)
	}
	if strings.Join(labels, " ") != "110 190" {
		t.Errorf("ticks of [110, 190]: %q, want its ends (no round value within)", labels)
	}
	labels = nil
	for _, tk := range (logTicks{}).Ticks(105, 420) {
		labels = append(labels, tk.Label)
	}
	if strings.Join(labels, " ") != "200 300 400" {
		t.Errorf("ticks of [105, 420]: %q", labels)
	}
}
