package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/quicbench/quicbench/model"
)

func TestClassifyEffect(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		lo, hi, band float64
		want         Practical
	}{
		{-0.01, 0.02, 0.05, Inside},
		{-0.05, 0.05, 0.05, Inside}, // the band's ends belong to it
		{0.01, 0.08, 0.05, Crosses},
		{-0.2, -0.03, 0.05, Crosses},
		{-0.2, 0.2, 0.05, Crosses},
		{0.06, 0.3, 0.05, Outside},
		{-0.4, -0.051, 0.05, Outside},
		{-0.01, 0.01, 0, PracticalUnknown}, // the rule off
		{nan, nan, 0.05, PracticalUnknown}, // no interval
	} {
		if got := ClassifyEffect(Interval{c.lo, c.hi}, c.band); got != c.want {
			t.Errorf("[%v, %v] against ±%v: %v, want %v", c.lo, c.hi, c.band, got, c.want)
		}
	}
}

// pairedCells returns cells A (h2) and B (h1) with n paired iterations: B's value of
// iteration i is base·link_i·(1 + noise), A's the same times (1 + shift)
// with its own noise; link_i varies a lot, as a link's luck does.
func pairedCells(seed uint64, n int, base, shift, noise float64, higher bool) (*CellStats, *CellStats) {
	rng := rand.New(rand.NewPCG(seed, 3))
	mk := func(proto string) *CellStats {
		return &CellStats{Cell: &model.Cell{Key: proto, Protocol: proto, HigherIsBetter: higher}}
	}
	a, b := mk("h2"), mk("h1")
	for i := range n {
		link := 1 + 0.3*math.Sin(float64(i)*1.3)
		vb := base * link * (1 + noise*rng.NormFloat64())
		va := base * (1 + shift) * link * (1 + noise*rng.NormFloat64())
		b.Samples = append(b.Samples, &model.Sample{Iteration: i, Seed: uint64(i), Status: model.StatusOK, Value: vb})
		a.Samples = append(a.Samples, &model.Sample{Iteration: i, Seed: uint64(i), Status: model.StatusOK, Value: va})
	}
	cfg := Config{Resamples: 100}
	a.Summary, b.Summary = Describe(a.Values(), cfg, 1), Describe(b.Values(), cfg, 2)
	return a, b
}

// The quick plan's clean-link stream comparison: A (h2) 0.9% slower than B
// (h1) in nearly every pair, significant, and far within ±5%: negligible.
// A difference of about 5% that is significant but whose interval reaches
// into the band is "possibly negligible"; a 30% one is plain; the rule
// turned off gives the test's verdict back.
func TestNegligibleVerdicts(t *testing.T) {
	cases := []struct {
		name         string
		shift, noise float64
		band         float64
		sig, verdict Verdict
		class        Practical
		text         string
	}{
		{"+0.9%", 0.009, 0.003, 0, BBetter, Negligible, Inside, "negligible (within ±5%)"},
		{"+0.9%, band 0.5%", 0.009, 0.003, 0.005, BBetter, BBetter, Outside, "h1 faster"},
		{"+0.9%, rule off", 0.009, 0.003, -1, BBetter, BBetter, PracticalUnknown, "h1 faster"},
		{"+5.5%", 0.055, 0.02, 0, BBetter, BBetter, Crosses, "h1 faster, possibly negligible"},
		{"-30%", -0.3, 0.02, 0, ABetter, ABetter, Outside, "h2 faster"},
		{"none, noisy", 0, 0.15, 0, NoDifference, NoDifference, Crosses, "no significant difference"},
		{"none, precise", 0, 0.01, 0, NoDifference, Negligible, Inside, "negligible (within ±5%)"},
	}
	for _, c := range cases {
		a, b := pairedCells(7, 20, 40, c.shift, c.noise, false)
		cmp := Compare(a, b, Config{MinEffect: c.band, Resamples: 100})
		if cmp.Significance != c.sig || cmp.Verdict != c.verdict || cmp.Effect.Class != c.class || cmp.Text() != c.text {
			t.Errorf("%s: significance %v, verdict %v, %v %+v: %q; want %v, %v, %v, %q",
				c.name, cmp.Significance, cmp.Verdict, cmp.Effect.Class, cmp.Effect, cmp.Text(), c.sig, c.verdict, c.class, c.text)
		}
		if c.class != PracticalUnknown && !cmp.Effect.CI.Contains(cmp.Effect.Rel) {
			t.Errorf("%s: effect %v outside its interval %v", c.name, cmp.Effect.Rel, cmp.Effect.CI)
		}
	}
	// goodput: higher is better, the band is symmetric
	a, b := pairedCells(8, 20, 500, -0.009, 0.003, true)
	if cmp := Compare(a, b, Config{Resamples: 100}); cmp.Significance != BBetter || cmp.Text() != "negligible (within ±5%)" {
		t.Errorf("goodput -0.9%%: %v %q", cmp.Significance, cmp.Text())
	}
	// 5 pairs give no 95% interval: nothing to judge, the test decides
	a, b = pairedCells(9, 5, 40, 0.009, 0.003, false)
	if cmp := Compare(a, b, Config{Resamples: 100}); cmp.Effect.Class != PracticalUnknown || cmp.Verdict != Insufficient {
		t.Errorf("5 pairs: %v %v", cmp.Effect.Class, cmp.Verdict)
	}
}

// A negligible verdict claims that the difference is within ±MinEffect.
// Where the true difference is exactly at the band's edge, the claim is
// false, and the two one-sided tests at 2.5% each must make it at most
// about 2.5% of the time. The simulation draws 4,000 groups of 6 to 40
// pairs whose true shift is +5% or -5% of B's median (additive: a shared
// link effect and independent noise), and counts the negligible verdicts.
func TestNegligibleAtTheBandEdge(t *testing.T) {
	const groups = 4000
	rng := rand.New(rand.NewPCG(2026, 29))
	mk := func(proto string) *CellStats { return &CellStats{Cell: &model.Cell{Key: proto, Protocol: proto}} }
	cfg := Config{Resamples: 50}
	claims, inside0 := 0, 0
	for g := range groups {
		n := 6 + g%35
		shift := 5.0
		if g%2 == 1 {
			shift = -5
		}
		for _, trueShift := range []float64{shift, 0} {
			a, b := mk("h3"), mk("h2")
			for i := range n {
				link := 20 * rng.NormFloat64()
				vb := 100 + link + 3*rng.NormFloat64()
				va := 100 + trueShift + link + 3*rng.NormFloat64()
				b.Samples = append(b.Samples, &model.Sample{Iteration: i, Seed: uint64(i), Status: model.StatusOK, Value: vb})
				a.Samples = append(a.Samples, &model.Sample{Iteration: i, Seed: uint64(i), Status: model.StatusOK, Value: va})
			}
			a.Summary, b.Summary = Describe(a.Values(), cfg, 1), Describe(b.Values(), cfg, 2)
			c := Compare(a, b, cfg)
			switch {
			case trueShift != 0 && c.Verdict == Negligible:
				claims++
			case trueShift == 0 && c.Verdict == Negligible:
				inside0++
			}
		}
	}
	rate := float64(claims) / groups
	t.Logf("true shift ±5%% (the band's edge), %d groups of 6 to 40 pairs: negligible claimed in %d (%.2f%%); "+
		"with no shift, negligible in %d (%.2f%%)", groups, claims, 100*rate, inside0, 100*float64(inside0)/groups)
	if rate > 0.025+0.01 {
		t.Errorf("negligible claimed at the band's edge in %.2f%% of groups, above 2.5%% + 1%%", 100*rate)
	}
	if inside0 < groups/2 {
		t.Errorf("with no shift only %d of %d groups were shown negligible: the simulation has no power", inside0, groups)
	}
}
