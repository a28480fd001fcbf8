package stats

import (
	"math"
	"testing"
)

// Expected values in this file were computed offline with SciPy 1.17.1 and
// NumPy 2.4 (Python 3.11) by this script:
//
//	import numpy as np
//	from scipy import stats
//	for df in [1, 2, 5, 10, 29, 100, 1000]:
//	    print("t", df, repr(stats.t.ppf(0.975, df)), repr(stats.t.ppf(0.05, df)))
//	a = [12.1, 13.4, 11.8, 15.2, 14.0, 12.9, 13.7, 16.1]
//	b = [10.2, 11.9, 10.8, 12.5, 11.1, 13.0, 10.5, 11.7, 12.2, 10.9, 11.4]
//	r = stats.ttest_ind(a, b, equal_var=False)
//	print("welch", repr(r.statistic), repr(r.pvalue), repr(r.df))
//	males = [19, 22, 16, 29, 24]; females = [20, 11, 17, 12]
//	r = stats.mannwhitneyu(males, females)
//	print("mwu textbook exact", repr(r.statistic), repr(r.pvalue))
//	r = stats.mannwhitneyu(males, females, method="asymptotic")
//	print("mwu textbook asym", repr(r.statistic), repr(r.pvalue))
//	x = [3, 5, 5, 6, 7, 7, 7, 9, 10, 12, 12, 14]
//	y = [1, 2, 2, 4, 5, 6, 6, 7, 8, 8, 9, 11, 13]
//	r = stats.mannwhitneyu(x, y)
//	print("mwu ties", repr(r.statistic), repr(r.pvalue))
//	p = [0.3, 1.7, 2.2, 4.1, 5.0, 6.3, 7.7]
//	q = [8.1, 9.0, 10.4, 11.2, 12.9, 13.3, 14.8, 15.5, 16.0, 17.2, 18.4, 19.9, 20.5, 21.7, 22.6]
//	r = stats.mannwhitneyu(p, q)
//	print("mwu exact 7x15", repr(r.statistic), repr(r.pvalue))
//	q2 = [0.9, 1.2, 4.4, 5.5, 6.6, 7.1, 8.0, 9.3, 2.5, 3.3, 10.5, 11.1, 12.2]
//	r = stats.mannwhitneyu(p, q2)
//	print("mwu exact 7x13 overlap", repr(r.statistic), repr(r.pvalue))
//	v = [12.1, 13.4, 11.8, 15.2, 14.0, 12.9, 13.7, 16.1, 9.5, 21.0]
//	print("pct", [repr(float(x)) for x in np.percentile(v, [5, 25, 50, 75, 95, 99])])
//	m = np.mean(v); s = np.std(v, ddof=1); h = stats.t.ppf(0.975, len(v)-1)*s/np.sqrt(len(v))
//	print("meanci", repr(m), repr(s), repr(m-h), repr(m+h))
//	big = [float(i) * 1.5 + 0.25 for i in range(300)]
//	small = [100.1, 150.2, 170.3, 260.4, 330.5]
//	r = stats.mannwhitneyu(small, big)
//	print("mwu exact 5x300", repr(r.statistic), repr(r.pvalue))

func near(t *testing.T, what string, got, want, relTol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > relTol*math.Max(1e-15, math.Abs(want)) {
		t.Errorf("%s = %.17g, want %.17g (relative tolerance %g)", what, got, want, relTol)
	}
}

func TestTQuantileMatchesSciPy(t *testing.T) {
	cases := []struct {
		df, q975, q05 float64
	}{
		{1, 12.706204736174694, -6.313751514675044},
		{2, 4.302652729749462, -2.9199855803537256},
		{5, 2.5705818356363146, -2.015048373333024},
		{10, 2.228138851986274, -1.812461122811676},
		{29, 2.045229642132703, -1.6991270265334977},
		{100, 1.9839715185235518, -1.6602343260853396},
		{1000, 1.9623390808264083, -1.6463788172854648},
	}
	for _, c := range cases {
		near(t, "t.ppf(0.975)", TQuantile(0.975, c.df), c.q975, 1e-9)
		near(t, "t.ppf(0.05)", TQuantile(0.05, c.df), c.q05, 1e-9)
	}
}

func TestWelchMatchesSciPy(t *testing.T) {
	a := []float64{12.1, 13.4, 11.8, 15.2, 14.0, 12.9, 13.7, 16.1}
	b := []float64{10.2, 11.9, 10.8, 12.5, 11.1, 13.0, 10.5, 11.7, 12.2, 10.9, 11.4}
	r := Welch(a, b)
	near(t, "t", r.T, 3.7507362106940705, 1e-12)
	near(t, "df", r.DF, 10.607201703884328, 1e-12)
	near(t, "p", r.P, 0.0034121779747810057, 1e-8)
	// symmetric
	r2 := Welch(b, a)
	near(t, "t reversed", r2.T, -3.7507362106940705, 1e-12)
	near(t, "p reversed", r2.P, r.P, 1e-12)
}

func TestWelchEdgeCases(t *testing.T) {
	if r := Welch([]float64{1}, []float64{1, 2}); !math.IsNaN(r.P) {
		t.Errorf("n=1: p = %v, want NaN", r.P)
	}
	if r := Welch([]float64{3, 3}, []float64{3, 3, 3}); r.P != 1 {
		t.Errorf("equal constants: p = %v, want 1", r.P)
	}
	if r := Welch([]float64{3, 3}, []float64{4, 4}); r.P != 0 || !math.IsInf(r.T, -1) {
		t.Errorf("different constants: %+v, want p 0 and t -Inf", r)
	}
}

func TestMannWhitneyMatchesSciPy(t *testing.T) {
	cases := []struct {
		name  string
		a, b  []float64
		u, p  float64
		exact bool
	}{
		// SciPy's documentation example (Conover's males/females ages), exact.
		{"textbook", []float64{19, 22, 16, 29, 24}, []float64{20, 11, 17, 12}, 17, 0.1111111111111111, true},
		{"ties, normal approximation", []float64{3, 5, 5, 6, 7, 7, 7, 9, 10, 12, 12, 14},
			[]float64{1, 2, 2, 4, 5, 6, 6, 7, 8, 8, 9, 11, 13}, 99, 0.2627987077926992, false},
		{"exact, complete separation", []float64{0.3, 1.7, 2.2, 4.1, 5.0, 6.3, 7.7},
			[]float64{8.1, 9.0, 10.4, 11.2, 12.9, 13.3, 14.8, 15.5, 16.0, 17.2, 18.4, 19.9, 20.5, 21.7, 22.6},
			0, 1.1727178909841448e-05, true},
		{"exact, overlap", []float64{0.3, 1.7, 2.2, 4.1, 5.0, 6.3, 7.7},
			[]float64{0.9, 1.2, 4.4, 5.5, 6.6, 7.1, 8.0, 9.3, 2.5, 3.3, 10.5, 11.1, 12.2},
			27, 0.15743034055727553, true},
	}
	big := make([]float64, 300)
	for i := range big {
		big[i] = float64(i)*1.5 + 0.25
	}
	cases = append(cases, struct {
		name  string
		a, b  []float64
		u, p  float64
		exact bool
	}{"exact, 5 x 300", []float64{100.1, 150.2, 170.3, 260.4, 330.5}, big, 676, 0.7152687114696651, true})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := MannWhitney(c.a, c.b)
			if r.U != c.u {
				t.Errorf("U = %v, want %v", r.U, c.u)
			}
			if r.Exact != c.exact {
				t.Errorf("exact = %v, want %v", r.Exact, c.exact)
			}
			near(t, "p", r.P, c.p, 1e-9)
		})
	}
}

func TestMannWhitneyAsymptoticTextbook(t *testing.T) {
	// scipy.stats.mannwhitneyu(males, females, method="asymptotic")
	r := mannWhitney([]float64{19, 22, 16, 29, 24}, []float64{20, 11, 17, 12}, true)
	if r.U != 17 || r.Exact {
		t.Errorf("U = %v exact = %v, want 17 false", r.U, r.Exact)
	}
	near(t, "asymptotic p", r.P, 0.11134688653314041, 1e-9)
}

func TestMannWhitneyDegenerate(t *testing.T) {
	if r := MannWhitney(nil, []float64{1}); !math.IsNaN(r.P) {
		t.Errorf("empty sample: p = %v, want NaN", r.P)
	}
	r := MannWhitney([]float64{5, 5, 5, 5, 5, 5, 5, 5, 5}, []float64{5, 5, 5, 5, 5, 5, 5, 5, 5})
	if r.P != 1 {
		t.Errorf("all equal: p = %v, want 1", r.P)
	}
}

func TestHolmWikipediaExample(t *testing.T) {
	// Wikipedia, "Holm–Bonferroni method", example: four hypotheses with
	// p = 0.01, 0.04, 0.03, 0.005 at alpha 0.05: only H1 and H4 are rejected.
	// Adjusted: sorted 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06,
	// max(0.04*1, 0.06) = 0.06.
	got := Holm([]float64{0.01, 0.04, 0.03, 0.005})
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		near(t, "holm", got[i], want[i], 1e-12)
	}
	rejected := 0
	for _, p := range got {
		if p < 0.05 {
			rejected++
		}
	}
	if rejected != 2 {
		t.Errorf("rejected %d hypotheses, want 2", rejected)
	}
}

func TestHolmSkipsNaNAndCaps(t *testing.T) {
	got := Holm([]float64{math.NaN(), 0.4, 0.02, math.NaN(), 0.9})
	if !math.IsNaN(got[0]) || !math.IsNaN(got[3]) {
		t.Errorf("NaN entries changed: %v", got)
	}
	// family of 3: 0.02*3 = 0.06, 0.4*2 = 0.8, max(0.9, 0.8) = 0.9
	near(t, "p[2]", got[2], 0.06, 1e-12)
	near(t, "p[1]", got[1], 0.8, 1e-12)
	near(t, "p[4]", got[4], 0.9, 1e-12)
	if g := Holm([]float64{0.6, 0.7}); g[0] != 1 || g[1] != 1 {
		t.Errorf("Holm not capped at 1: %v", g)
	}
}

func TestCliffsDeltaByHand(t *testing.T) {
	// a = {1, 2, 3}, b = {2, 4}: pairs (1,2)< (1,4)< (2,2)= (2,4)< (3,2)> (3,4)<
	// -> one ">", four "<": delta = (1 - 4) / 6 = -0.5.
	near(t, "delta", CliffsDelta([]float64{1, 2, 3}, []float64{2, 4}), -0.5, 1e-15)
	near(t, "delta reversed", CliffsDelta([]float64{2, 4}, []float64{1, 2, 3}), 0.5, 1e-15)
	if d := CliffsDelta([]float64{10, 11}, []float64{1, 2, 3}); d != 1 {
		t.Errorf("separated: delta = %v, want 1", d)
	}
	for _, c := range []struct {
		d    float64
		want string
	}{{0.1, "negligible"}, {-0.2, "small"}, {0.4, "medium"}, {-0.5, "large"}, {1, "large"}} {
		if got := Magnitude(c.d); got != c.want {
			t.Errorf("Magnitude(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func TestExactUSurvivalSmall(t *testing.T) {
	// n1 = n2 = 2: U takes 0,1,2,2,3,4 over the C(4,2) = 6 orderings.
	for u, want := range map[int]float64{0: 1, 1: 5.0 / 6, 2: 4.0 / 6, 3: 2.0 / 6, 4: 1.0 / 6, 5: 0} {
		near(t, "P(U>=u)", exactUSurvival(2, 2, u), want, 1e-12)
	}
}
