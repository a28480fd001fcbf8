package stats

import (
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// MaxExactPairs is the largest number of non-zero paired differences whose
// signed-rank test uses the exact sign-flip distribution; above it the
// normal approximation is used. The exact distribution costs about
// n·n(n+1) additions (127,500 at n = 50).
const MaxExactPairs = 50

// SRTest is the result of the two-sided Wilcoxon signed-rank test of paired
// differences: a sign-flip permutation test whose statistic is the sum of
// the ranks of |d| carried by the positive differences.
type SRTest struct {
	N     int     // non-zero differences (the ones ranked)
	Zeros int     // zero differences, dropped before ranking (Wilcoxon's method)
	W     float64 // W+: sum of the mid-ranks of |d| over positive differences
	Z     float64 // standardised statistic (NaN for the exact test)
	P     float64 // two-sided p-value; NaN without differences, 1 when every difference is 0
	Exact bool    // p from the exact sign-flip distribution
}

// Dir is the direction of the differences: +1 when the positive ones carry
// more rank (W+ > W-), -1 when the negative ones do, 0 when balanced.
func (t SRTest) Dir() int {
	if t.N == 0 {
		return 0
	}
	total := float64(t.N) * float64(t.N+1) / 2
	switch {
	case t.W > total-t.W:
		return 1
	case t.W < total-t.W:
		return -1
	}
	return 0
}

// SignedRank runs the two-sided Wilcoxon signed-rank test on the paired
// differences d (which it does not modify). Zero differences are dropped;
// the absolute values of the others are ranked, ties sharing their mid-rank.
// Under the null hypothesis every difference is as likely positive as
// negative, so each of the 2^n sign vectors is equally likely given the
// observed ranks. For n <= MaxExactPairs the p-value is counted over all 2^n
// of them (exactly, also with tied ranks): p = min(1, 2·P(T >= max(W+,
// W-))). Above, W+ is standardised with mean n(n+1)/4 and variance
// n(n+1)(2n+1)/24 - Σ(t³-t)/48 over tie groups, with a continuity
// correction of 1/2. Infinite differences (a failed sample ranked worst)
// are ranked above every finite one; NaN differences count as zero.
func SignedRank(d []float64) SRTest {
	var abs []float64
	var pos []bool
	zeros := 0
	for _, v := range d {
		if v == 0 || math.IsNaN(v) {
			zeros++
			continue
		}
		abs = append(abs, math.Abs(v))
		pos = append(pos, v > 0)
	}
	n := len(abs)
	r := SRTest{N: n, Zeros: zeros, Z: math.NaN(), P: math.NaN()}
	if n == 0 {
		if zeros > 0 {
			r.P = 1
		}
		return r
	}
	ranks2, tieTerm := doubledRanks(abs)
	var w2 int // 2·W+
	for i, p := range pos {
		if p {
			w2 += ranks2[i]
		}
	}
	r.W = float64(w2) / 2
	if n <= MaxExactPairs {
		r.Exact = true
		r.P = exactSignFlipP(ranks2, w2)
		return r
	}
	fn := float64(n)
	mean := fn * (fn + 1) / 4
	sd := math.Sqrt(fn*(fn+1)*(2*fn+1)/24 - tieTerm/48)
	if sd == 0 {
		r.Z, r.P = 0, 1
		return r
	}
	dev := math.Max(0, math.Abs(r.W-mean)-0.5)
	r.Z = math.Copysign(dev/sd, r.W-mean)
	r.P = math.Min(1, 2*distuv.UnitNormal.Survival(dev/sd))
	return r
}

// doubledRanks returns twice the mid-ranks (1-based) of x, which are
// integers, and the tie term Σ(t³-t) over groups of equal values.
func doubledRanks(x []float64) ([]int, float64) {
	idx := make([]int, len(x))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return x[idx[a]] < x[idx[b]] })
	r := make([]int, len(x))
	var tie float64
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && x[idx[j]] == x[idx[i]] {
			j++
		}
		t := float64(j - i)
		tie += t*t*t - t
		for k := i; k < j; k++ {
			r[idx[k]] = i + j + 1 // 2 · (i+1 + j)/2
		}
		i = j
	}
	return r, tie
}

// exactSignFlipP returns the two-sided p-value of the observed 2·W+ = w2
// under the sign-flip distribution of the doubled ranks r2: the number of
// sign vectors (subsets of r2 taken positive) whose sum is at least as far
// from the centre as w2, over 2^n. The counts are the coefficients of
// Π(1 + q^r2[i]), built one rank at a time; they are exact in float64 up to
// 2^53, so for n <= 52.
func exactSignFlipP(r2 []int, w2 int) float64 {
	total := 0
	for _, v := range r2 {
		total += v
	}
	c := make([]float64, total+1)
	c[0] = 1
	reach := 0
	for _, v := range r2 {
		reach += v
		for s := reach; s >= v; s-- {
			c[s] += c[s-v]
		}
	}
	hi := max(w2, total-w2) // the distribution is symmetric about total/2
	var tail float64
	for s := hi; s <= total; s++ {
		tail += c[s]
	}
	return math.Min(1, 2*tail/math.Ldexp(1, len(r2)))
}

// SignFlipMinP is the smallest two-sided p-value the signed-rank test can
// give with n pairs: every difference of one sign. Exact (n <= MaxExactPairs):
// 2/2^n. Normal approximation: the p-value of W+ = n(n+1)/2 without ties.
// 1 for n = 0.
func SignFlipMinP(n int) float64 {
	if n <= 0 {
		return 1
	}
	if n <= MaxExactPairs {
		return math.Min(1, math.Ldexp(2, -n))
	}
	fn := float64(n)
	sd := math.Sqrt(fn * (fn + 1) * (2*fn + 1) / 24)
	dev := fn*(fn+1)/4 - 0.5
	return math.Min(1, 2*distuv.UnitNormal.Survival(dev/sd))
}

// MannWhitneyMinP is the smallest two-sided p-value MannWhitney can give
// for samples of sizes n1 and n2 without ties: complete separation (every
// value of one sample below every value of the other). Exact (min(n1, n2)
// <= 8): 2/C(n1+n2, n1). Otherwise the normal approximation at U = n1·n2.
// 1 when a sample is empty.
func MannWhitneyMinP(n1, n2 int) float64 {
	if n1 <= 0 || n2 <= 0 {
		return 1
	}
	if min(n1, n2) <= 8 {
		return math.Min(1, 2*math.Exp(-logChoose(n1+n2, n1)))
	}
	f1, f2 := float64(n1), float64(n2)
	sd := math.Sqrt(f1 * f2 * (f1 + f2 + 1) / 12)
	z := (f1*f2/2 - 0.5) / sd
	return math.Min(1, 2*distuv.UnitNormal.Survival(z))
}

// pairedDiff returns the difference x - y of matched values, treating two
// infinities of the same sign (two failures ranked worst) as equal.
func pairedDiff(x, y float64) float64 {
	if math.IsInf(x, 0) && x == y {
		return 0
	}
	return x - y
}

// MaxHodgesLehmannPairs caps the pairs whose Hodges-Lehmann estimate is
// computed: it sorts n(n+1)/2 Walsh averages (500,500 at 1,000 pairs).
const MaxHodgesLehmannPairs = 1000

// HodgesLehmann returns the Hodges-Lehmann estimate of the centre of the
// paired differences d, the median of the n(n+1)/2 Walsh averages
// (d_i + d_j)/2 for i <= j, with its confidence interval at level
// inverted from the signed-rank test (Hodges and Lehmann 1963): the k-th
// smallest and k-th largest Walsh averages, k the largest integer with
// P(T < k) <= (1-level)/2 under the null distribution of W+ without ties
// (exact for n <= MaxExactPairs, otherwise the normal approximation
// k = floor(n(n+1)/4 - z·σ)). When even k = 1 is beyond the level (n <= 5
// at 95%) the interval is NaN: so few pairs cannot give it. Everything is
// NaN for an empty d, a d with a non-finite value, or more than
// MaxHodgesLehmannPairs values.
func HodgesLehmann(d []float64, level float64) (float64, Interval) {
	n := len(d)
	if n == 0 || n > MaxHodgesLehmannPairs {
		return math.NaN(), nanInterval
	}
	for _, v := range d {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return math.NaN(), nanInterval
		}
	}
	walsh := make([]float64, 0, n*(n+1)/2)
	for i := range n {
		for j := i; j < n; j++ {
			walsh = append(walsh, (d[i]+d[j])/2)
		}
	}
	slices.Sort(walsh)
	est := QuantileSorted(walsh, 0.5)
	m := len(walsh)
	tail := (1 - level) / 2
	k := 0
	if n <= MaxExactPairs {
		// counts of W+ = s for the ranks 1..n: coefficients of Π(1 + q^i)
		c := make([]float64, m+1)
		c[0] = 1
		for i := 1; i <= n; i++ {
			for s := i * (i + 1) / 2; s >= i; s-- {
				c[s] += c[s-i]
			}
		}
		total := math.Ldexp(1, n)
		var cum float64 // P(T < k)
		for k < m/2 && (cum+c[k])/total <= tail {
			cum += c[k]
			k++
		}
	} else {
		fn := float64(n)
		z := distuv.UnitNormal.Quantile(1 - tail)
		k = int(math.Floor(fn*(fn+1)/4 - z*math.Sqrt(fn*(fn+1)*(2*fn+1)/24)))
	}
	if k < 1 {
		return est, nanInterval
	}
	return est, Interval{walsh[k-1], walsh[m-k]}
}
