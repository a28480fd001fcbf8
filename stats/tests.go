package stats

import (
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// TTest is the result of Welch's unequal-variance t-test.
type TTest struct {
	T  float64 // t statistic of mean(a) - mean(b)
	DF float64 // Welch-Satterthwaite degrees of freedom
	P  float64 // two-sided p-value; NaN when a test is impossible
}

// Welch runs Welch's two-sided t-test of equal means. It needs at least two
// values in each sample (otherwise every field is NaN). When both samples
// have zero variance, P is 1 if the means are equal and 0 if they differ.
func Welch(a, b []float64) TTest {
	na, nb := float64(len(a)), float64(len(b))
	if len(a) < 2 || len(b) < 2 {
		return TTest{math.NaN(), math.NaN(), math.NaN()}
	}
	ma, va := stat.MeanVariance(a, nil)
	mb, vb := stat.MeanVariance(b, nil)
	qa, qb := va/na, vb/nb
	se2 := qa + qb
	if se2 == 0 {
		if ma == mb {
			return TTest{0, math.NaN(), 1}
		}
		return TTest{math.Copysign(math.Inf(1), ma-mb), math.NaN(), 0}
	}
	t := (ma - mb) / math.Sqrt(se2)
	df := se2 * se2 / (qa*qa/(na-1) + qb*qb/(nb-1))
	p := 2 * distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Survival(math.Abs(t))
	return TTest{T: t, DF: df, P: math.Min(p, 1)}
}

// UTest is the result of the two-sided Mann-Whitney U test.
type UTest struct {
	U     float64 // U of the first sample: #(a > b) + #(a = b)/2 over all pairs
	Z     float64 // standardised statistic (NaN for the exact test)
	P     float64 // two-sided p-value; NaN when a sample is empty
	Exact bool    // p from the exact distribution of U
}

// MannWhitney runs the two-sided Mann-Whitney U test, choosing the method as
// SciPy's scipy.stats.mannwhitneyu(method="auto") does: the exact null
// distribution of U when there are no ties and one sample has at most 8
// values; otherwise the normal approximation with tie correction and a
// continuity correction of 1/2.
func MannWhitney(a, b []float64) UTest { return mannWhitney(a, b, false) }

// mannWhitney is MannWhitney; asymptotic forces the normal approximation.
func mannWhitney(a, b []float64, asymptotic bool) UTest {
	n1, n2 := len(a), len(b)
	if n1 == 0 || n2 == 0 {
		return UTest{math.NaN(), math.NaN(), math.NaN(), false}
	}
	u1, tieTerm, ties := rankU(a, b)
	f1, f2 := float64(n1), float64(n2)
	u := math.Max(u1, f1*f2-u1)
	if !asymptotic && !ties && min(n1, n2) <= 8 {
		return UTest{U: u1, Z: math.NaN(), P: math.Min(1, 2*exactUSurvival(n1, n2, int(math.Round(u)))), Exact: true}
	}
	n := f1 + f2
	sd := math.Sqrt(f1 * f2 / 12 * ((n + 1) - tieTerm/(n*(n-1))))
	if sd == 0 { // every value equal
		return UTest{U: u1, Z: 0, P: 1}
	}
	z := (u - f1*f2/2 - 0.5) / sd
	p := 2 * distuv.UnitNormal.Survival(z)
	return UTest{U: u1, Z: z, P: math.Min(1, p)}
}

// rankU returns U of a (sum of a's mid-ranks in the pooled sample minus
// n1(n1+1)/2), the tie term sum(t^3 - t) over tie groups, and whether any tie
// exists.
func rankU(a, b []float64) (u1, tieTerm float64, ties bool) {
	type obs struct {
		v     float64
		fromA bool
	}
	all := make([]obs, 0, len(a)+len(b))
	for _, v := range a {
		all = append(all, obs{v, true})
	}
	for _, v := range b {
		all = append(all, obs{v, false})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	var r1 float64
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		t := float64(j - i)
		if t > 1 {
			ties = true
			tieTerm += t*t*t - t
		}
		mid := float64(i+j+1) / 2 // ranks i+1..j
		for k := i; k < j; k++ {
			if all[k].fromA {
				r1 += mid
			}
		}
		i = j
	}
	f1 := float64(len(a))
	return r1 - f1*(f1+1)/2, tieTerm, ties
}

// exactUSurvival returns P(U >= u) under the null hypothesis for samples of
// sizes n1 and n2 without ties. The frequencies of U are the coefficients of
// the Gaussian binomial coefficient [n1+n2 choose m]_q with m = min(n1, n2),
// built as the product over i = 1..m of (1 - q^(n+i)) / (1 - q^i).
func exactUSurvival(n1, n2, u int) float64 {
	m, n := min(n1, n2), max(n1, n2)
	c := make([]float64, m*n+1)
	c[0] = 1
	deg := 0
	for i := 1; i <= m; i++ {
		// multiply by (1 - q^(n+i))
		deg += n + i
		for k := min(deg, len(c)-1); k >= n+i; k-- {
			c[k] -= c[k-n-i]
		}
		// divide by (1 - q^i): c'[k] = c[k] + c'[k-i]
		for k := i; k < len(c); k++ {
			c[k] += c[k-i]
		}
		deg -= i
	}
	var total, tail float64
	for k, v := range c {
		total += v
		if k >= u {
			tail += v
		}
	}
	return tail / total
}

// CliffsDelta returns Cliff's delta, P(a > b) - P(a < b) over all pairs, in
// [-1, 1]; NaN when a sample is empty. It is 2U/(n1 n2) - 1 with U from
// MannWhitney, computed in O((n1+n2) log(n1+n2)).
func CliffsDelta(a, b []float64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return math.NaN()
	}
	u1, _, _ := rankU(a, b)
	return 2*u1/(float64(len(a))*float64(len(b))) - 1
}

// Magnitude labels |d| of Cliff's delta with the thresholds of Romano et al.
// (2006): negligible below 0.147, small below 0.33, medium below 0.474,
// large otherwise.
func Magnitude(d float64) string {
	switch a := math.Abs(d); {
	case math.IsNaN(d):
		return ""
	case a < 0.147:
		return "negligible"
	case a < 0.33:
		return "small"
	case a < 0.474:
		return "medium"
	default:
		return "large"
	}
}

// Holm returns Holm's step-down adjusted p-values of p, in p's order. NaN
// entries are not tests: they are left out of the family and stay NaN.
func Holm(p []float64) []float64 {
	idx := make([]int, 0, len(p))
	for i, v := range p {
		if !math.IsNaN(v) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(i, j int) int {
		switch {
		case p[i] < p[j]:
			return -1
		case p[i] > p[j]:
			return 1
		}
		return 0
	})
	out := make([]float64, len(p))
	for i := range out {
		out[i] = math.NaN()
	}
	m := len(idx)
	running := 0.0
	for k, i := range idx {
		adj := math.Min(1, float64(m-k)*p[i])
		running = math.Max(running, adj)
		out[i] = running
	}
	return out
}
