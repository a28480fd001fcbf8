package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// addGroup adds one cell per protocol of a group of test to ds, with the
// values per iteration (NaN: a sample that timed out). It returns the next
// free cell id.
func addGroup(ds *model.Dataset, id int64, test, scenario string, vals map[string][]float64) int64 {
	for _, proto := range []string{"h1", "h2", "h3"} {
		v, ok := vals[proto]
		if !ok {
			continue
		}
		group := scenario + "/" + test + "/builtin/cubic"
		ds.Cells = append(ds.Cells, model.Cell{ID: id, Key: scenario + "/" + test + "/" + proto + "/builtin/cubic", Group: group,
			Scenario: scenario, Test: test, Protocol: proto, Client: "builtin", CC: "cubic", Metric: "time", Unit: "ms"})
		for i, x := range v {
			s := model.Sample{ID: id*1000 + int64(i), CellID: id, Iteration: i, Seed: uint64(1000 + i), Status: model.StatusOK, Value: x}
			if math.IsNaN(x) {
				s.Status, s.Error, s.Value = model.StatusFailed, "timeout after 30s waiting for the response body", 0
			}
			ds.Samples = append(ds.Samples, s)
		}
		id++
	}
	return id
}

// consistent returns n pairs where h3 is 30% faster than h2 in every one,
// over a link whose per-iteration effect varies a lot (so that the two
// samples overlap while every pair agrees).
func consistent(n int) (h2, h3 []float64) {
	for i := range n {
		base := 100 * (1 + 0.9*float64(i%5))
		h2 = append(h2, base)
		h3 = append(h3, 0.7*base)
	}
	return h2, h3
}

// The quick plan's situation: 36 comparisons in one family with 5 (or 2)
// paired iterations. Holm's first step multiplies the smallest possible p
// (2/2^5) by 36: the design cannot reach 0.05, whatever the data, so the
// verdict is "too few samples" with the 11 pairs needed, never "no
// significant difference"; the 10%/70% rule still shows the effect.
func TestTooFewSamplesInLargeFamily(t *testing.T) {
	for _, n := range []int{2, 5} {
		ds := &model.Dataset{}
		id := int64(1)
		for g := range 36 {
			h2, h3 := consistent(n)
			id = addGroup(ds, id, "ttfb", fmt.Sprintf("link-%d", g), map[string][]float64{"h2": h2, "h3": h3})
		}
		a, err := Analyze(ds, Config{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range a.Comparisons {
			if c.Family != "ttfb" || c.FamilySize != 36 || c.Test.Method != SignedRankExact || c.Test.N1 != n {
				t.Fatalf("n=%d: family %q (%d), test %s", n, c.Family, c.FamilySize, c.Test.Label())
			}
			if c.MinP != 1 || c.Verdict != Insufficient || c.Needed != 11 || c.Text() != "too few samples (needs 11 pairs)" {
				t.Errorf("n=%d: min p %v verdict %q needed %d", n, c.MinP, c.Text(), c.Needed)
			}
			if c.Rule.Outcome != ABetter || c.Rule.AShare != 1 || c.RelDiff > -0.29 {
				t.Errorf("n=%d: rule %+v rel %v, want h3 better in every pair", n, c.Rule, c.RelDiff)
			}
		}
	}
}

func TestPairedVerdictSmallFamily(t *testing.T) {
	analyze := func(groups, n int, alpha float64) *Analysis {
		t.Helper()
		ds := &model.Dataset{}
		id := int64(1)
		for g := range groups {
			h2, h3 := consistent(n)
			id = addGroup(ds, id, "ttfb", fmt.Sprintf("link-%d", g), map[string][]float64{"h2": h2, "h3": h3})
		}
		a, err := Analyze(ds, Config{Alpha: alpha})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// 6 of 6 pairs consistent, alone: p = 2/64
	c := analyze(1, 6, 0.05).Comparisons[0]
	if c.Verdict != ABetter || c.Text() != "QUIC faster" || c.P != 2.0/64 || c.Test.Method != SignedRankExact {
		t.Errorf("6 of 6: %q p %v test %s", c.Text(), c.P, c.Test.Label())
	}
	// 8 of 8 in a family of 6: Holm gives 6·2/256 = 0.047 to each
	for _, c := range analyze(6, 8, 0.05).Comparisons {
		if c.Verdict != ABetter || math.Abs(c.P-6*2.0/256) > 1e-15 || c.FamilySize != 6 {
			t.Errorf("8 of 8, family of 6: %q p %v", c.Text(), c.P)
		}
	}
	// 5 of 5 pairs: a two-sided sign-flip test cannot go below 2/32 =
	// 0.0625 even alone, so at 0.05 it is "too few samples" (6 needed)...
	c = analyze(1, 5, 0.05).Comparisons[0]
	if c.Verdict != Insufficient || c.MinP != 0.0625 || c.Needed != 6 || c.Rule.Outcome != ABetter {
		t.Errorf("5 of 5 at 0.05: %q min p %v needed %d rule %v", c.Text(), c.MinP, c.Needed, c.Rule.Outcome)
	}
	// ... and significant at alpha 0.1 in a family of one.
	c = analyze(1, 5, 0.1).Comparisons[0]
	if c.Verdict != ABetter || c.P != 0.0625 {
		t.Errorf("5 of 5 at 0.1: %q p %v", c.Text(), c.P)
	}
	// A design that can reach alpha and does not is "no significant
	// difference".
	ds := &model.Dataset{}
	addGroup(ds, 1, "ttfb", "clean", map[string][]float64{"h2": {10, 11, 12, 13, 14, 15, 16, 17}, "h3": {11, 10, 13, 12, 15, 14, 17, 16}})
	a, _ := Analyze(ds, Config{})
	if c := a.Comparisons[0]; c.Verdict != NoDifference || c.Text() != "no significant difference" || c.MinP >= 0.05 {
		t.Errorf("balanced: %q p %v min p %v", c.Text(), c.P, c.MinP)
	}
}

// Holm's correction runs within a family (one test and metric) by default,
// over the whole run with CorrectionScope "run". With 9 pairs (smallest p
// 2/512) families of 4 and 9 can reach 0.05 (9·2/512 = 0.035); the run's
// 13 comparisons cannot (0.051), and would need 10 pairs.
func TestHolmFamilyVersusRun(t *testing.T) {
	ds := &model.Dataset{}
	id := int64(1)
	for g := range 4 {
		h2, h3 := consistent(9)
		id = addGroup(ds, id, "ttfb", fmt.Sprintf("link-%d", g), map[string][]float64{"h2": h2, "h3": h3})
	}
	for g := range 3 {
		h1, h2 := consistent(9)
		_, h3 := consistent(9)
		id = addGroup(ds, id, "page", fmt.Sprintf("grid-%d", g), map[string][]float64{"h1": h1, "h2": h2, "h3": h3})
	}
	fam, err := Analyze(ds, Config{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := Analyze(ds, Config{CorrectionScope: ScopeRun})
	if err != nil {
		t.Fatal(err)
	}
	if len(fam.Comparisons) != 4+9 {
		t.Fatalf("%d comparisons", len(fam.Comparisons))
	}
	raw := 2.0 / 512
	for i, c := range fam.Comparisons {
		want, wantSize := "ttfb", 4
		if c.A.Cell.Test == "page" {
			want, wantSize = "page", 9
		}
		if c.Family != want || c.FamilySize != wantSize {
			t.Errorf("family %q (%d), want %q (%d)", c.Family, c.FamilySize, want, wantSize)
		}
		r := run.Comparisons[i]
		if r.Family != ScopeRun || r.FamilySize != 13 {
			t.Errorf("run scope: family %q (%d)", r.Family, r.FamilySize)
		}
		// h3 vs h2 in a page group ties (both 0.7·base): p = 1
		if c.Test.P != raw {
			continue
		}
		if math.Abs(c.MinP-float64(wantSize)*raw) > 1e-15 || math.Abs(r.MinP-13*raw) > 1e-15 {
			t.Errorf("min p %v (run %v)", c.MinP, r.MinP)
		}
		// every significant raw p ties at the smallest: Holm gives m·p
		if math.Abs(c.P-math.Min(1, float64(wantSize)*raw)) > 1e-15 {
			t.Errorf("%s: adjusted p %v, want %v", c.A.Cell.Key, c.P, float64(wantSize)*raw)
		}
		if c.Verdict != ABetter || r.Verdict != Insufficient || r.Needed != 10 {
			t.Errorf("family verdict %q, run verdict %q (needed %d)", c.Text(), r.Text(), r.Needed)
		}
	}
	if _, err := Analyze(ds, Config{CorrectionScope: "test"}); err == nil || !strings.Contains(err.Error(), `"test"`) {
		t.Errorf("unknown scope: %v", err)
	}
}

// A protocol that times out much more often than the other: Fisher's test
// on the failed/valid counts, a note in the verdict, and the variant that
// ranks the timeouts as the worst values.
func TestFailuresCarriedByVerdict(t *testing.T) {
	nan := math.NaN()
	var h2, h3 []float64
	for i := range 30 {
		base := 100 + float64(i%6)
		h2 = append(h2, base)
		h3 = append(h3, base+1) // h3 a little slower on the samples that completed
		if i%5 == 0 {
			h2[i] = nan // h2 timed out 6 of 30
		}
	}
	ds := &model.Dataset{}
	addGroup(ds, 1, "download", "loss-5", map[string][]float64{"h2": h2, "h3": h3})
	a, err := Analyze(ds, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := a.Comparisons[0]
	f := c.Failures
	if f.FailedA != 0 || f.CountedA != 30 || f.FailedB != 6 || f.CountedB != 30 {
		t.Fatalf("counts %+v", f)
	}
	near(t, "Fisher p", f.P, 0.023720703916957263, 1e-9)
	if !f.Differs || f.Note != "h2 timed out 6 of 30, h3 0 of 30 (Fisher p 0.024)" {
		t.Errorf("note %q differs %v", f.Note, f.Differs)
	}
	// on the completed pairs h3 is slower (24 pairs, every one +1), which
	// is significant but within the smallest effect of interest: the note
	// follows the verdict either way
	if c.Significance != BBetter || c.Verdict != Negligible || !strings.HasPrefix(c.Text(), "negligible (within ±5%); h2 timed out 6 of 30") {
		t.Errorf("verdict %q (significance %v)", c.Text(), c.Significance)
	}
	off, err := Analyze(ds, Config{MinEffect: -1})
	if err != nil {
		t.Fatal(err)
	}
	if c := off.Comparisons[0]; c.Verdict != BBetter || !strings.HasPrefix(c.Text(), "TCP faster; h2 timed out 6 of 30") {
		t.Errorf("without the band: verdict %q", c.Text())
	}
	// with the timeouts ranked worst, 6 pairs favour h3 by the largest
	// margin and 24 favour h2 by 1: W+ = 24·(24+1)/2 = 300 of 465
	if f.Worst.Method != SignedRankExact || f.Worst.N1 != 30 {
		t.Errorf("worst variant test %s", f.Worst.Label())
	}
	if f.WorstVerdict != NoDifference || c.WorstText() != "no significant difference" {
		t.Errorf("worst variant verdict %q p %v", c.WorstText(), f.WorstP)
	}
	// a rare failure on one side is not worth a note
	ds = &model.Dataset{}
	h2[0], h2[5], h2[10], h2[15], h2[20] = 100, 101, 102, 103, 104
	addGroup(ds, 1, "download", "loss-5", map[string][]float64{"h2": h2, "h3": h3})
	a, _ = Analyze(ds, Config{})
	if f := a.Comparisons[0].Failures; f.Differs || f.Note != "" || f.FailedB != 1 {
		t.Errorf("1 of 30: %+v", f)
	}
}

// Samples that cannot be paired (a resumed run with other seeds) are
// compared as independent samples with Mann-Whitney's test.
func TestUnpairedUsesMannWhitney(t *testing.T) {
	ds := &model.Dataset{}
	addGroup(ds, 1, "download", "x", map[string][]float64{"h2": {10, 11, 12, 13, 14}, "h3": {5, 6, 7, 8, 9}})
	for i := range ds.Samples {
		if ds.Cells[1].ID == ds.Samples[i].CellID {
			ds.Samples[i].Seed += 77
		}
	}
	a, err := Analyze(ds, Config{})
	if err != nil {
		t.Fatal(err)
	}
	c := a.Comparisons[0]
	if c.Pairs != 0 || c.Test.Method != MannWhitneyExact || c.Test.Label() != "Mann-Whitney exact, 5+5" {
		t.Errorf("pairs %d test %s", c.Pairs, c.Test.Label())
	}
	if c.Verdict != ABetter || math.Abs(c.P-2.0/252) > 1e-15 || math.Abs(c.MinP-2.0/252) > 1e-15 {
		t.Errorf("verdict %q p %v min p %v", c.Text(), c.P, c.MinP)
	}
	if !PairedDesign(2, 3, 4) || PairedDesign(1, 1, 1) || PairedDesign(2, 5, 3) {
		t.Error("PairedDesign")
	}
}

// Under identical distributions (with the per-iteration link effect both
// protocols share), the paired verdicts are significant at alpha 0.05 in
// at most 6% of 2,000 simulated groups of 6 to 20 pairs, and the verdicts
// that claim a difference, with the smallest effect of interest (±5%)
// applied, are no more than those: the log gives how many of them say
// "possibly negligible" and how many groups were shown negligible
// (docs/statistics.md, "False-positive rate").
func TestPairedFalsePositiveRate(t *testing.T) {
	const groups, alpha = 2000, 0.05
	rng := rand.New(rand.NewPCG(2026, 14))
	cell := func(proto string) *CellStats {
		return &CellStats{Cell: &model.Cell{Key: proto, Protocol: proto}}
	}
	cfg := Config{Alpha: alpha, Resamples: 50}
	significant, claimed, possibly, negligible, tested := 0, 0, 0, 0, 0
	for g := range groups {
		n := 6 + g%15
		a, b := cell("h3"), cell("h2")
		for i := range n {
			link := math.Exp(0.5 * rng.NormFloat64())
			for _, cs := range []*CellStats{a, b} {
				v := 100 * link * math.Exp(0.1*rng.NormFloat64())
				cs.Samples = append(cs.Samples, &model.Sample{Iteration: i, Seed: uint64(i), Status: model.StatusOK, Value: v})
			}
		}
		a.Summary, b.Summary = Describe(a.Values(), cfg, 1), Describe(b.Values(), cfg, 2)
		c := Compare(a, b, cfg)
		if !c.Test.Method.Paired() {
			t.Fatalf("group %d: %s", g, c.Test.Label())
		}
		tested++
		if c.Significance == ABetter || c.Significance == BBetter {
			significant++
		}
		switch {
		case c.Verdict == Negligible:
			negligible++
		case c.PossiblyNegligible():
			possibly++
			claimed++
		case c.Verdict == ABetter || c.Verdict == BBetter:
			claimed++
		}
	}
	rate := float64(claimed) / float64(tested)
	t.Logf("identical distributions, %d groups of 6 to 20 pairs, alpha %g, min effect ±5%%: significant %d (%.2f%%); "+
		"verdict \"A/B faster\" %d (%.2f%%), of which \"possibly negligible\" %d; \"negligible\" %d (%.2f%%)",
		tested, alpha, significant, 100*float64(significant)/float64(tested), claimed, 100*rate, possibly, negligible, 100*float64(negligible)/float64(tested))
	if sig := float64(significant) / float64(tested); sig > alpha+0.01 {
		t.Errorf("false-positive rate of the test %.4f above alpha + 1%%", sig)
	}
	if claimed > significant {
		t.Errorf("%d verdicts claim a difference, more than the %d significant tests", claimed, significant)
	}
}
