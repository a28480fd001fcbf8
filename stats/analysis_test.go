package stats

import (
	"math"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// cellPair adds two cells (h2, h3) of one group to ds with the given values
// per iteration (NaN = failed sample).
func cellPair(ds *model.Dataset, id int64, scenario string, higher bool, h2, h3 []float64) {
	for k, p := range []struct {
		proto string
		v     []float64
	}{{"h2", h2}, {"h3", h3}} {
		cid := id + int64(k)
		group := scenario + "/download/size=1MB/builtin/cubic"
		ds.Cells = append(ds.Cells, model.Cell{ID: cid, Key: scenario + "/download/size=1MB/" + p.proto + "/builtin/cubic",
			Group: group, Scenario: scenario, Test: "download", Protocol: p.proto, Client: "builtin", CC: "cubic",
			Factors: []model.Factor{{Name: "size", Value: "1MB"}}, Metric: "time", Unit: "ms", HigherIsBetter: higher})
		ds.Samples = append(ds.Samples, model.Sample{ID: cid * 1000, CellID: cid, Iteration: -1, Warmup: true, Status: model.StatusOK, Value: 1e9})
		for i, v := range p.v {
			s := model.Sample{ID: cid*1000 + int64(i) + 1, CellID: cid, Iteration: i, Seed: uint64(100 + i), Status: model.StatusOK, Value: v}
			if math.IsNaN(v) {
				s.Status, s.Error, s.Value = model.StatusFailed, "timeout after 30s", 0
			}
			ds.Samples = append(ds.Samples, s)
		}
	}
}

func TestAnalyzeVerdicts(t *testing.T) {
	var h2, h3, b2, b3 []float64
	for i := range 20 {
		base := 100 + float64(i%7)*3
		h2 = append(h2, base)
		h3 = append(h3, base*0.7+float64(i%3))
		b2 = append(b2, base)
		b3 = append(b3, base+float64(i%5)-2)
	}
	h2[4] = math.NaN() // a failed sample breaks one pair
	ds := &model.Dataset{}
	cellPair(ds, 1, "loss-2", false, h2, h3)
	cellPair(ds, 3, "baseline", false, b2, b3)
	a, err := Analyze(ds, Config{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Groups) != 2 || len(a.Tests) != 1 || len(a.Comparisons) != 2 {
		t.Fatalf("groups/tests/comparisons = %d/%d/%d, want 2/1/2", len(a.Groups), len(a.Tests), len(a.Comparisons))
	}
	loss := a.Groups[0]
	if loss.Cells[0].Cell.Protocol != "h2" || loss.Cells[1].Cell.Protocol != "h3" {
		t.Errorf("cells not in protocol order")
	}
	h2c := loss.Cells[0]
	if h2c.Summary.N != 19 || h2c.Summary.Failed != 1 || h2c.Warmups != 1 || len(h2c.Failed) != 1 {
		t.Errorf("h2: n=%d failed=%d warmups=%d", h2c.Summary.N, h2c.Summary.Failed, h2c.Warmups)
	}
	c := loss.Comparisons[0]
	if c.A.Cell.Protocol != "h3" || c.B.Cell.Protocol != "h2" {
		t.Errorf("comparison is %s vs %s, want h3 vs h2", c.A.Cell.Protocol, c.B.Cell.Protocol)
	}
	if c.Pairs != 19 {
		t.Errorf("pairs = %d, want 19", c.Pairs)
	}
	if c.Verdict != ABetter || c.Text() != "QUIC faster" {
		t.Errorf("verdict %v %q (p=%v), want QUIC faster", c.Verdict, c.Text(), c.P)
	}
	if c.Rule.Outcome != ABetter || c.Rule.AShare < 0.7 {
		t.Errorf("rule %+v, want A better", c.Rule)
	}
	if c.Cliff != -1 || c.Magnitude != "large" {
		t.Errorf("cliff %v %q", c.Cliff, c.Magnitude)
	}
	if c.PairedDiff >= 0 || !c.PairedDiffCI.Contains(c.PairedDiff) || c.RelDiff > -0.2 {
		t.Errorf("paired diff %v CI %+v rel %v", c.PairedDiff, c.PairedDiffCI, c.RelDiff)
	}
	if loss.BestLabel() != "h3" {
		t.Errorf("best = %q, want h3", loss.BestLabel())
	}
	// The paired design decides: the signed-rank test of 19 pairs.
	if c.Test.Method != SignedRankExact || c.Test.N1 != 19 || c.Family != "download" || c.FamilySize != 2 {
		t.Errorf("test %s, family %q (%d), want signed-rank exact, 19 pairs, download (2)", c.Test.Label(), c.Family, c.FamilySize)
	}
	// Holm over a family of two: the adjusted p is at least the raw one.
	if c.P < c.Test.P || c.P > 2*c.Test.P+1e-15 {
		t.Errorf("adjusted p %v vs raw %v", c.P, c.Test.P)
	}
	base := a.Groups[1].Comparisons[0]
	// not significant, and the 95% interval of the difference lies within
	// the default ±5%: negligible
	if base.Significance != NoDifference || base.Verdict != Negligible || base.Text() != "negligible (within ±5%)" {
		t.Errorf("baseline verdict %q (significance %v) p=%v effect %+v", base.Text(), base.Significance, base.P, base.Effect)
	}
	if base.Rule.Outcome != NoDifference || a.Groups[1].BestLabel() != "h2 = h3" {
		t.Errorf("baseline rule %+v best %q, want a tie", base.Rule, a.Groups[1].BestLabel())
	}
	if rep := h2c.Representative(); rep == nil || rep.Value != h2c.Summary.Median && math.Abs(rep.Value-h2c.Summary.Median) > 3 {
		t.Errorf("representative %+v for median %v", rep, h2c.Summary.Median)
	}
	// the same dataset and seed give identical intervals
	b, _ := Analyze(ds, Config{Seed: 5})
	if b.Comparisons[0].PairedDiffCI != c.PairedDiffCI || b.Cells[0].Summary.MedianCI != a.Cells[0].Summary.MedianCI {
		t.Error("analysis not deterministic")
	}
}

func TestAnalyzeHigherIsBetter(t *testing.T) {
	var g2, g3 []float64
	for i := range 12 {
		g2 = append(g2, 50+float64(i%4))
		g3 = append(g3, 80+float64(i%4))
	}
	ds := &model.Dataset{}
	cellPair(ds, 1, "baseline", true, g2, g3)
	a, err := Analyze(ds, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := a.Comparisons[0]
	if c.Verdict != ABetter || c.Text() != "QUIC better" || c.Rule.Outcome != ABetter {
		t.Errorf("goodput: verdict %q rule %+v, want QUIC better", c.Text(), c.Rule)
	}
}

func TestAnalyzeTooFewSamples(t *testing.T) {
	ds := &model.Dataset{}
	cellPair(ds, 1, "x", false, []float64{1}, []float64{2, 3})
	a, err := Analyze(ds, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c := a.Comparisons[0]; c.Verdict != Insufficient || !math.IsNaN(c.P) || c.Text() != "too few samples (needs 6 pairs)" {
		t.Errorf("verdict %q p %v", c.Text(), c.P)
	}
}

func TestAnalyzeRejectsInconsistentData(t *testing.T) {
	ds := &model.Dataset{}
	cellPair(ds, 1, "x", false, []float64{1, 2}, []float64{2, 3})
	dup := *ds
	dup.Cells = append(dup.Cells[:2:2], model.Cell{ID: 1, Key: "other"})
	if _, err := Analyze(&dup, Config{}); err == nil || !strings.Contains(err.Error(), "duplicate cell id 1") {
		t.Errorf("duplicate id: %v", err)
	}
	orphan := *ds
	orphan.Samples = append(orphan.Samples[:len(orphan.Samples):len(orphan.Samples)], model.Sample{ID: 77, CellID: 9})
	if _, err := Analyze(&orphan, Config{}); err == nil || !strings.Contains(err.Error(), "sample 77") {
		t.Errorf("orphan sample: %v", err)
	}
	if _, err := Analyze(ds, Config{Level: 1.5}); err == nil {
		t.Error("level 1.5 accepted")
	}
	if _, err := Analyze(nil, Config{}); err == nil {
		t.Error("nil dataset accepted")
	}
}

func grp(best []string, kv ...string) *Group {
	g := &Group{Best: best, Client: "builtin", CC: "cubic", Scenario: strings.Join(kv, ",")}
	for i := 0; i < len(kv); i += 2 {
		g.Factors = append(g.Factors, model.Factor{Name: kv[i], Value: kv[i+1]})
	}
	return g
}

func TestBuildTree(t *testing.T) {
	h3, tie, h2 := []string{"h3"}, []string{"h2", "h3"}, []string{"h2"}
	var groups []*Group
	for _, rate := range []string{"2mbit", "10mbit", "50mbit"} {
		// delay 109ms: h3 always; delay 9ms: loss decides (0% tie, 2% h3),
		// except at 50mbit without loss where h2 wins. Delay and loss
		// separate equally well at the root; delay is earlier in plan order.
		groups = append(groups,
			grp(h3, "rate", rate, "delay", "109ms", "loss", "0%"),
			grp(h3, "rate", rate, "delay", "109ms", "loss", "2%"),
			grp(h3, "rate", rate, "delay", "9ms", "loss", "2%"))
		if rate == "50mbit" {
			groups = append(groups, grp(h2, "rate", rate, "delay", "9ms", "loss", "0%"))
		} else {
			groups = append(groups, grp(tie, "rate", rate, "delay", "9ms", "loss", "0%"))
		}
	}
	groups = append(groups, grp(nil, "rate", "1mbit", "delay", "9ms", "loss", "0%"))
	tr := BuildTree(groups)
	if tr == nil {
		t.Fatal("no tree")
	}
	if tr.Excluded != 1 {
		t.Errorf("excluded = %d, want 1", tr.Excluded)
	}
	if strings.Join(tr.Features, ",") != "rate,delay,loss" {
		t.Errorf("features %v", tr.Features)
	}
	want := `delay = 109ms: h3 (6)
delay = 9ms
  loss = 0%
    rate = 2mbit, 10mbit: h2 = h3 (2)
    rate = 50mbit: h2 (1)
  loss = 2%: h3 (3)
`
	if got := tr.String(); got != want {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
}

func TestBuildTreeMixedLeafAndTrivial(t *testing.T) {
	// two configurations that no factor separates but the scenario does
	a := grp([]string{"h3"})
	a.Scenario = "lossy"
	b := grp([]string{"h2"})
	b.Scenario = "clean"
	tr := BuildTree([]*Group{a, b})
	if got := tr.String(); got != "scenario = lossy: h3 (1)\nscenario = clean: h2 (1)\n" {
		t.Errorf("tree:\n%s", got)
	}
	// all the same label: a single leaf
	tr = BuildTree([]*Group{grp([]string{"h3"}, "rate", "1"), grp([]string{"h3"}, "rate", "2")})
	if got := tr.String(); got != "all: h3 (2)\n" {
		t.Errorf("tree: %q", got)
	}
	if BuildTree([]*Group{grp([]string{"h3"})}) != nil {
		t.Error("tree of one configuration")
	}
	// identical configurations with different labels: a mixed leaf
	c, d := grp([]string{"h3"}, "rate", "1"), grp([]string{"h2"}, "rate", "1")
	c.Scenario, d.Scenario = "s", "s"
	tr = BuildTree([]*Group{c, d})
	if got := tr.String(); got != "all: mixed: h2 (1), h3 (1)\n" {
		t.Errorf("tree: %q", got)
	}
}

func TestGroupLabel(t *testing.T) {
	f := func(kv ...string) []model.Factor {
		var out []model.Factor
		for i := 0; i < len(kv); i += 2 {
			out = append(out, model.Factor{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	for _, c := range []struct {
		g    Group
		want string
	}{
		{Group{Scenario: "loss-2", Factors: f("size", "1MB"), Client: "builtin", CC: "cubic"}, "loss-2 · size=1MB"},
		{Group{Scenario: "grid-10mbit-9ms", Factors: f("rate", "10mbit", "delay", "9ms", "objects", "5")}, "rate=10mbit · delay=9ms · objects=5"},
		{Group{Scenario: "rate=10mbit", Factors: f("rate", "10mbit", "size", "5KB")}, "rate=10mbit · size=5KB"},
		{Group{Scenario: "lossy-2%", Factors: f("loss", "2%", "size", "1MB")}, "loss=2% · size=1MB"},
		{Group{Scenario: "wifi-2%-busy", Factors: f("loss", "2%", "size", "1MB")}, "wifi-2%-busy · size=1MB"},
		{Group{Scenario: "baseline", Client: "chromium", CC: "bbr"}, "baseline · chromium · bbr"},
		{Group{Scenario: "baseline"}, "baseline"},
	} {
		if got := c.g.Label(); got != c.want {
			t.Errorf("Label(%+v) = %q, want %q", c.g, got, c.want)
		}
	}
}

func TestAnalyzeSplitsTestsByMetric(t *testing.T) {
	ds := &model.Dataset{}
	cellPair(ds, 1, "a", false, []float64{1, 2, 3}, []float64{1, 2, 3})
	cellPair(ds, 3, "b", false, []float64{1, 2, 3}, []float64{1, 2, 3})
	for i := range ds.Cells {
		if ds.Cells[i].Scenario == "b" {
			ds.Cells[i].Metric = "goodput"
		}
	}
	a, err := Analyze(ds, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Tests) != 2 || a.Tests[0].Name != "download · time" || a.Tests[1].Name != "download · goodput" {
		t.Errorf("tests: %d, first %q", len(a.Tests), a.Tests[0].Name)
	}
}
