package stats

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bruteSignFlipP enumerates the 2^n sign vectors of the mid-ranks of |d|
// (zeros dropped) and returns the two-sided p-value of W+: the reference
// the counting in SignedRank must reproduce.
func bruteSignFlipP(d []float64) float64 {
	var abs []float64
	var pos []bool
	for _, v := range d {
		if v != 0 {
			abs = append(abs, math.Abs(v))
			pos = append(pos, v > 0)
		}
	}
	n := len(abs)
	rank := make([]float64, n)
	for i := range abs {
		less, equal := 0, 0
		for j := range abs {
			switch {
			case abs[j] < abs[i]:
				less++
			case abs[j] == abs[i]:
				equal++
			}
		}
		rank[i] = float64(less) + float64(equal+1)/2
	}
	var w, total float64
	for i := range rank {
		total += rank[i]
		if pos[i] {
			w += rank[i]
		}
	}
	far := math.Max(w, total-w)
	hits := 0
	for mask := 0; mask < 1<<n; mask++ {
		var s float64
		for i := range n {
			if mask&(1<<i) != 0 {
				s += rank[i]
			}
		}
		if s >= far-1e-9 {
			hits++
		}
	}
	return math.Min(1, 2*float64(hits)/float64(int(1)<<n))
}

func TestSignedRankByHand(t *testing.T) {
	cases := []struct {
		name string
		d    []float64
		w    float64
		p    float64
	}{
		// every difference positive: 1 of 32 sign vectors, doubled
		{"5 of 5", []float64{1, 2, 3, 4, 5}, 15, 2.0 / 32},
		{"6 of 6", []float64{-3, -1, -4, -1.5, -9, -2.6}, 0, 2.0 / 64},
		// W+ = 13 of 15: subsets of {1..5} summing to >= 13 are {all},
		// {2,3,4,5}, {1,3,4,5}: 3 of 32, doubled
		{"4 of 5", []float64{1, -2, 3, 4, 5}, 13, 6.0 / 32},
		// |d| = 1,1,1,2: mid-ranks 2,2,2,4; W+ = 8 of 10; T = 2k + 4j
		// reaches 8 for (k=2, j=1) three ways and (k=3, j=1) once: 4 of 16
		{"ties", []float64{1, 1, -1, 2}, 8, 8.0 / 16},
		// zeros are dropped: the same as 5 of 5
		{"zeros", []float64{0, 1, 2, 0, 3, 4, 5}, 15, 2.0 / 32},
	}
	for _, c := range cases {
		r := SignedRank(c.d)
		if !r.Exact || r.W != c.w || math.Abs(r.P-c.p) > 1e-15 {
			t.Errorf("%s: W+ %v p %v exact %v, want W+ %v p %v", c.name, r.W, r.P, r.Exact, c.w, c.p)
		}
	}
	if r := SignedRank([]float64{0, 0}); r.P != 1 || r.N != 0 || r.Zeros != 2 {
		t.Errorf("all zero: %+v, want p 1", r)
	}
	if r := SignedRank(nil); !math.IsNaN(r.P) {
		t.Errorf("empty: p %v, want NaN", r.P)
	}
	if d := SignedRank([]float64{-1, -2, 3}).Dir(); d != 0 {
		t.Errorf("balanced direction %d", d)
	}
	if d := SignedRank([]float64{-1, -2, 0.5}).Dir(); d != -1 {
		t.Errorf("direction %d, want -1", d)
	}
}

// The counted distribution equals brute-force enumeration, with ties,
// zeros and infinite differences (failures ranked worst).
func TestSignedRankMatchesEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		n := 1 + rng.IntN(14)
		d := make([]float64, n)
		for i := range d {
			d[i] = float64(rng.IntN(7) - 3) // many ties and zeros
			if trial%3 == 0 {
				d[i] += rng.NormFloat64()
			}
			if trial%5 == 0 && i == 0 {
				d[i] = math.Inf(1)
			}
		}
		got, want := SignedRank(d).P, bruteSignFlipP(d)
		if math.Abs(got-want) > 1e-12 && !(math.IsNaN(got) && want == 1) {
			t.Fatalf("d=%v: p %v, enumeration %v", d, got, want)
		}
	}
}

// Above MaxExactPairs the normal approximation is close to the exact
// count (which float64 still holds accurately enough at n = 60).
func TestSignedRankNormalApproximation(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 5 {
		d := make([]float64, 60)
		for i := range d {
			d[i] = rng.NormFloat64() + 0.3
		}
		r := SignedRank(d)
		if r.Exact || math.IsNaN(r.Z) {
			t.Fatalf("n=60: exact %v z %v, want the normal approximation", r.Exact, r.Z)
		}
		r2, _ := doubledRanks(absNonZero(d))
		w2 := 0
		for i, v := range d {
			if v > 0 {
				w2 += r2[i]
			}
		}
		exact := exactSignFlipP(r2, w2)
		if math.Abs(r.P-exact) > 0.15*exact+1e-4 {
			t.Errorf("normal p %v, exact %v", r.P, exact)
		}
	}
}

func absNonZero(d []float64) []float64 {
	out := make([]float64, 0, len(d))
	for _, v := range d {
		if v != 0 {
			out = append(out, math.Abs(v))
		}
	}
	return out
}

func TestMinP(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"sign-flip 2", SignFlipMinP(2), 0.5},
		{"sign-flip 5", SignFlipMinP(5), 0.0625},
		{"sign-flip 11", SignFlipMinP(11), 2.0 / 2048},
		{"sign-flip 0", SignFlipMinP(0), 1},
		{"sign-flip 1", SignFlipMinP(1), 1},
		{"MW 2+2", MannWhitneyMinP(2, 2), 2.0 / 6},
		{"MW 5+5", MannWhitneyMinP(5, 5), 2.0 / 252},
		{"MW 3+7", MannWhitneyMinP(3, 7), 2.0 / 120},
	} {
		if math.Abs(c.got-c.want) > 1e-12*c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// the most extreme outcomes reach exactly these p-values
	if p := SignedRank([]float64{1, 2, 3, 4, 5}).P; p != SignFlipMinP(5) {
		t.Errorf("5 of 5: p %v, min %v", p, SignFlipMinP(5))
	}
	if p := MannWhitney([]float64{1, 2, 3, 4, 5}, []float64{6, 7, 8, 9, 10}).P; math.Abs(p-MannWhitneyMinP(5, 5)) > 1e-15 {
		t.Errorf("separated 5+5: p %v, min %v", p, MannWhitneyMinP(5, 5))
	}
	// beyond the exact range the approximations' bounds stay tiny
	if p := SignFlipMinP(60); !(p < 1e-9) {
		t.Errorf("sign-flip 60: %v", p)
	}
	if !(MannWhitneyMinP(20, 20) < MannWhitneyMinP(8, 8)) {
		t.Error("Mann-Whitney min p does not decrease with n")
	}
}

func TestNeededIterations(t *testing.T) {
	for _, c := range []struct {
		paired bool
		m      int
		alpha  float64
		want   int
	}{
		{true, 1, 0.05, 6},   // 2/64 = 0.031
		{true, 36, 0.05, 11}, // 36·2/2048 = 0.035; 36·2/1024 = 0.070
		{true, 6, 0.05, 8},   // 6·2/256 = 0.047
		{false, 1, 0.05, 4},  // 2/70 = 0.029; 2/20 = 0.1
		{false, 36, 0.05, 7}, // 36·2/3432 = 0.021; 36·2/924 = 0.078
	} {
		if got := NeededIterations(c.paired, c.m, c.alpha); got != c.want {
			t.Errorf("paired %v family %d: %d, want %d", c.paired, c.m, got, c.want)
		}
	}
}

func TestFisherExactTextbook(t *testing.T) {
	for _, c := range []struct {
		name       string
		a, b, c, d int
		want       float64
	}{
		// Fisher's lady tasting tea: 3 of 4 cups right; 34/70
		{"tea", 3, 1, 1, 3, 0.4857142857142857},
		// the dieting example of Wikipedia's article (R: 0.002759)
		{"dieting", 1, 9, 11, 3, 0.002759456185220083},
		{"separated 5/5", 0, 5, 5, 0, 2.0 / 252},
		{"6 of 30 timeouts vs none", 6, 24, 0, 30, 0.023720703916957263},
		{"2 of 30 vs none", 2, 28, 0, 30, 0.4915254237288136},
		{"no failures", 0, 30, 0, 30, 1},
	} {
		near(t, c.name, FisherExact(c.a, c.b, c.c, c.d), c.want, 1e-9)
		// symmetric in rows and columns
		near(t, c.name+" transposed", FisherExact(c.a, c.c, c.b, c.d), c.want, 1e-9)
		near(t, c.name+" rows swapped", FisherExact(c.c, c.d, c.a, c.b), c.want, 1e-9)
	}
	if !math.IsNaN(FisherExact(-1, 0, 0, 0)) {
		t.Error("negative count accepted")
	}
}

func TestHodgesLehmann(t *testing.T) {
	// 1..5: Walsh averages 1, 1.5, 2, 2, 2.5, 2.5, 3, 3, 3, 3.5, 3.5, 4,
	// 4, 4.5, 5; median 3. At 95% even the extreme Walsh averages cover
	// only 1 - 2/32 = 93.75%: no interval. At 90% k = 1: [1, 5].
	d := []float64{3, 1, 5, 2, 4}
	est, ci := HodgesLehmann(d, 0.95)
	if est != 3 || ci.Valid() {
		t.Errorf("1..5 at 95%%: %v %+v, want 3 and no interval", est, ci)
	}
	if _, ci := HodgesLehmann(d, 0.90); ci != (Interval{1, 5}) {
		t.Errorf("1..5 at 90%%: %+v, want [1, 5]", ci)
	}
	// n = 10 at 95%: the critical value of the signed-rank test is 8
	// (P(T <= 8) = 25/1024 = 0.0244, P(T <= 9) = 0.0322), so the interval
	// runs from the 9th smallest to the 9th largest of 55 Walsh averages.
	d = []float64{-2.1, 0.4, 1.3, 2.2, 2.9, 3.3, 4.8, 5.1, 6.6, 12}
	var walsh []float64
	for i := range d {
		for j := i; j < len(d); j++ {
			walsh = append(walsh, (d[i]+d[j])/2)
		}
	}
	slices.Sort(walsh)
	est, ci = HodgesLehmann(d, 0.95)
	if est != walsh[27] || ci != (Interval{walsh[8], walsh[46]}) {
		t.Errorf("n=10: %v %+v, want %v [%v, %v]", est, ci, walsh[27], walsh[8], walsh[46])
	}
	if est, _ := HodgesLehmann(nil, 0.95); !math.IsNaN(est) {
		t.Error("empty")
	}
	// normal approximation for many pairs: the interval holds the estimate
	rng := rand.New(rand.NewPCG(8, 9))
	d = make([]float64, 200)
	for i := range d {
		d[i] = 5 + rng.NormFloat64()
	}
	est, ci = HodgesLehmann(d, 0.95)
	if !ci.Contains(est) || ci.Hi-ci.Lo > 0.5 || !ci.Contains(5) {
		t.Errorf("n=200: %v %+v", est, ci)
	}
}
