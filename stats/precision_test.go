package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestPairPrecision(t *testing.T) {
	// 10 differences 1..10: Hodges-Lehmann 5.5, 95% interval from the 9th
	// smallest to the 9th largest Walsh average (n = 10: k = 9): 3 and 8.
	d := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	est, ci := HodgesLehmann(d, PrecisionLevel)
	if est != 5.5 || ci.Lo != 3 || ci.Hi != 8 {
		t.Fatalf("HodgesLehmann = %v %v, want 5.5 [3, 8]", est, ci)
	}
	if got := PairPrecision(d, 50); got != 5 { // half-width 2.5 of 50
		t.Errorf("PairPrecision = %v, want 5", got)
	}
	for _, tt := range []struct {
		d   []float64
		ref float64
	}{
		{d[:4], 50},     // too few pairs for a 95% interval
		{d, 0},          // no median to scale by
		{d, math.NaN()}, // none at all
		{[]float64{1, 2, math.Inf(1), 4, 5, 6, 7}, 50}, // a failure ranked worst
	} {
		if got := PairPrecision(tt.d, tt.ref); !math.IsInf(got, 1) {
			t.Errorf("PairPrecision(%v, %v) = %v, want +Inf", tt.d, tt.ref, got)
		}
	}
}

func TestGroupPrecisionTakesTheWidestPair(t *testing.T) {
	narrow, wide := map[int]float64{}, map[int]float64{}
	ref := map[int]float64{}
	for i := range 10 {
		ref[i] = 100
		narrow[i] = 100 + float64(i%3) // differences 0..2
		wide[i] = 100 + float64(10*i)  // differences 0..90
	}
	got := GroupPrecision([]PairValues{
		{A: "h3", B: "h1", ByIterA: narrow, ByIterB: ref},
		{A: "h2", B: "h1", ByIterA: wide, ByIterB: ref},
	})
	if got.WorstPair != "h2 vs h1" || got.Pairs != 10 || !(got.Worst > 10) {
		t.Errorf("GroupPrecision = %+v, want the h2 vs h1 pair, over 10%%", got)
	}
	// an iteration only one side has is not a pair
	delete(ref, 9)
	if got := GroupPrecision([]PairValues{{A: "h3", B: "h1", ByIterA: narrow, ByIterB: ref}}); got.Pairs != 9 {
		t.Errorf("pairs = %d, want 9", got.Pairs)
	}
	if got := GroupPrecision(nil); !math.IsInf(got.Worst, 1) {
		t.Errorf("no pairs: %+v", got)
	}
}

// TestAdaptiveStoppingFalsePositives simulates groups whose two protocols
// have identical distributions (sharing each iteration's link noise, as
// paired samples do), iterates each until the stopping rule's precision
// is reached or a maximum count, and tests the resulting pairs as the
// report does. Stopping on precision, never on the p-value, must keep the
// false-positive rate at alpha + 1% at most.
func TestAdaptiveStoppingFalsePositives(t *testing.T) {
	const (
		groups    = 2000
		alpha     = 0.05
		minIter   = 6
		maxIter   = 40
		precision = 5.0 // ±5% of the median
	)
	rng := rand.New(rand.NewPCG(2026, 11))
	noise := []float64{0.01, 0.03, 0.06, 0.12} // within-iteration noise of a group
	var fp, byPrecision, byMax int
	for g := range groups {
		sigma := noise[g%len(noise)]
		a, b := map[int]float64{}, map[int]float64{}
		var d []float64
		for it := 0; ; it++ {
			shared := 100 * math.Exp(0.3*rng.NormFloat64()) // the link's draw, common to the pair
			x := shared * math.Exp(sigma*rng.NormFloat64())
			y := shared * math.Exp(sigma*rng.NormFloat64())
			a[it], b[it] = x, y
			d = append(d, x-y)
			n := it + 1
			if n < minIter {
				continue
			}
			if GroupPrecision([]PairValues{{A: "h3", B: "h2", ByIterA: a, ByIterB: b}}).Worst <= precision {
				byPrecision++
				break
			}
			if n == maxIter {
				byMax++
				break
			}
		}
		if sr := SignedRank(d); sr.P < alpha {
			fp++
		}
	}
	rate := float64(fp) / groups
	t.Logf("false positives %d of %d groups (%.2f%%); stopped on precision %d, at the maximum %d", fp, groups, 100*rate, byPrecision, byMax)
	if rate > alpha+0.01 {
		t.Errorf("false-positive rate %.2f%% over alpha + 1%%", 100*rate)
	}
	if byPrecision < groups/4 || byMax < groups/10 {
		t.Errorf("the simulation does not exercise both stops: precision %d, maximum %d", byPrecision, byMax)
	}
}
