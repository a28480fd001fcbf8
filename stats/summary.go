package stats

import (
	"cmp"
	"hash/fnv"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Config holds the parameters of every estimate and test. The zero value of a
// field means its default; see Default.
type Config struct {
	Level     float64 // confidence level of intervals (default 0.95)
	Alpha     float64 // significance level after Holm's correction (default 0.05)
	Resamples int     // bootstrap resamples (default 2000)
	Seed      uint64  // bootstrap seed (default 1)
	// Margin and Share define the page-load rule: A is better than B when A is
	// at least Margin better in at least Share of the paired runs (defaults
	// 0.10 and 0.70).
	Margin float64
	Share  float64
	// CorrectionScope is the family within which Holm's correction runs:
	// ScopeFamily (the default) corrects the comparisons of one test and
	// metric together, across its configurations and protocol pairs;
	// ScopeRun corrects every comparison of the run together.
	CorrectionScope string
	// FailGap is the difference between the failure rates of two sides
	// from which a comparison notes it even when Fisher's test is not
	// significant (default 0.2: 20 percentage points).
	FailGap float64
	// MinEffect is the smallest effect of interest, as a fraction of the
	// reference's median (default 0.05: ±5%): a difference whose 95%
	// interval lies within ±MinEffect is negligible, and a significant one
	// whose interval reaches into the band is "possibly negligible"
	// (Effect, ClassifyEffect). A negative value turns the rule off.
	MinEffect float64
}

// Correction scopes (Config.CorrectionScope).
const (
	ScopeFamily = "family"
	ScopeRun    = "run"
)

// Default returns the configuration used when a field is left zero.
func Default() Config {
	return Config{Level: 0.95, Alpha: 0.05, Resamples: 2000, Seed: 1, Margin: 0.10, Share: 0.70,
		CorrectionScope: ScopeFamily, FailGap: 0.2, MinEffect: 0.05}
}

// WithDefaults returns c with every zero field replaced by its default.
func (c Config) WithDefaults() Config {
	d := Default()
	c.Level = cmp.Or(c.Level, d.Level)
	c.Alpha = cmp.Or(c.Alpha, d.Alpha)
	c.Resamples = cmp.Or(c.Resamples, d.Resamples)
	c.Seed = cmp.Or(c.Seed, d.Seed)
	c.Margin = cmp.Or(c.Margin, d.Margin)
	c.Share = cmp.Or(c.Share, d.Share)
	c.CorrectionScope = cmp.Or(c.CorrectionScope, d.CorrectionScope)
	c.FailGap = cmp.Or(c.FailGap, d.FailGap)
	c.MinEffect = cmp.Or(c.MinEffect, d.MinEffect)
	return c
}

// Interval is a two-sided confidence interval. Both ends are NaN when it
// cannot be computed (too few values).
type Interval struct {
	Lo, Hi float64
}

// Valid reports whether the interval has finite ends.
func (iv Interval) Valid() bool { return !math.IsNaN(iv.Lo) && !math.IsNaN(iv.Hi) }

// Contains reports whether v lies in [Lo, Hi].
func (iv Interval) Contains(v float64) bool { return v >= iv.Lo && v <= iv.Hi }

var nanInterval = Interval{math.NaN(), math.NaN()}

// Summary describes the valid values of one cell. Every field is NaN when
// there is no valid value; SD, CV and MeanCI need at least two values.
type Summary struct {
	N      int // valid values
	Failed int // failed or invalid samples (warm-ups excluded); set by Analyze
	Mean   float64
	SD     float64 // sample standard deviation (n-1)
	CV     float64 // SD / Mean
	MeanCI Interval
	Median float64
	// MedianCI is the percentile bootstrap interval of the median.
	MedianCI                         Interval
	Min, P5, P25, P75, P95, P99, Max float64
}

// Describe summarises x (which it does not modify) at the confidence level of
// c. stream selects the bootstrap random stream (use StreamOf(cell key)).
func Describe(x []float64, c Config, stream uint64) Summary {
	c = c.WithDefaults()
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	nan := math.NaN()
	sum := Summary{N: n, Mean: nan, SD: nan, CV: nan, MeanCI: nanInterval, Median: nan, MedianCI: nanInterval,
		Min: nan, P5: nan, P25: nan, P75: nan, P95: nan, P99: nan, Max: nan}
	if n == 0 {
		return sum
	}
	sum.Min, sum.Max = s[0], s[n-1]
	sum.P5 = QuantileSorted(s, 0.05)
	sum.P25 = QuantileSorted(s, 0.25)
	sum.Median = QuantileSorted(s, 0.5)
	sum.P75 = QuantileSorted(s, 0.75)
	sum.P95 = QuantileSorted(s, 0.95)
	sum.P99 = QuantileSorted(s, 0.99)
	sum.MedianCI = BootstrapMedianCI(s, c.Level, c.Resamples, c.Seed, stream)
	if n == 1 {
		sum.Mean = s[0]
		return sum
	}
	sum.Mean, sum.SD = stat.MeanStdDev(s, nil)
	if sum.Mean != 0 {
		sum.CV = sum.SD / math.Abs(sum.Mean)
	}
	half := TQuantile(1-(1-c.Level)/2, float64(n-1)) * sum.SD / math.Sqrt(float64(n))
	sum.MeanCI = Interval{sum.Mean - half, sum.Mean + half}
	return sum
}

// TQuantile returns the p-quantile of Student's t distribution with df
// degrees of freedom.
func TQuantile(p, df float64) float64 {
	return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df}.Quantile(p)
}

// QuantileSorted returns the p-quantile (Hyndman-Fan definition 7) of the
// ascending slice s; NaN when s is empty.
func QuantileSorted(s []float64, p float64) float64 {
	n := len(s)
	if n == 0 {
		return math.NaN()
	}
	h := float64(n-1) * p
	lo := int(math.Floor(h))
	if lo < 0 {
		return s[0]
	}
	if lo >= n-1 {
		return s[n-1]
	}
	return s[lo] + (h-float64(lo))*(s[lo+1]-s[lo])
}

// Median returns the median of x (which it does not modify); NaN when empty.
func Median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	return QuantileSorted(s, 0.5)
}

// StreamOf derives a bootstrap stream number from a key (FNV-1a, 64 bits).
func StreamOf(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// BootstrapMedianCI returns the percentile bootstrap interval at level of the
// median of the ascending slice s, from resamples resamples drawn with a PCG
// generator (seed, stream). The same inputs always give the same interval.
//
// Because s is sorted, the median of a resample is the value at the median
// of the resampled indices; the indices are tallied in a count array, so a
// resample costs O(n) with no sorting. Each 64-bit output of the generator
// gives two indices, (low 32 bits · n) >> 32 and (high 32 bits · n) >> 32.
func BootstrapMedianCI(s []float64, level float64, resamples int, seed, stream uint64) Interval {
	n := len(s)
	switch {
	case n == 0:
		return nanInterval
	case n == 1 || s[0] == s[n-1]:
		return Interval{s[0], s[n-1]}
	}
	if resamples < 1 {
		resamples = Default().Resamples
	}
	rng := rand.New(rand.NewPCG(seed, stream))
	counts := make([]int32, n)
	meds := make([]float64, resamples)
	un := uint64(n)
	for b := range meds {
		clear(counts)
		if n <= math.MaxUint32 {
			// two 32-bit draws per 64-bit output: index = (draw * n) >> 32
			for k := 0; k < n; k += 2 {
				r := rng.Uint64()
				counts[((r&math.MaxUint32)*un)>>32]++
				if k+1 < n {
					counts[((r>>32)*un)>>32]++
				}
			}
		} else {
			for range n {
				hi, _ := bits.Mul64(rng.Uint64(), un)
				counts[hi]++
			}
		}
		meds[b] = medianOfCounts(s, counts)
	}
	slices.Sort(meds)
	a := (1 - level) / 2
	return Interval{QuantileSorted(meds, a), QuantileSorted(meds, 1-a)}
}

// medianOfCounts returns the median of the multiset that holds s[i] counts[i]
// times (s ascending, counts summing to len(s)).
func medianOfCounts(s []float64, counts []int32) float64 {
	n := len(s)
	lo, hi := (n-1)/2, n/2 // 0-based ranks of the middle order statistics
	cum, i := 0, 0
	for {
		cum += int(counts[i])
		if cum > lo {
			break
		}
		i++
	}
	if cum > hi { // both middle ranks fall on s[i] (always so for odd n)
		return s[i]
	}
	j := i + 1
	for counts[j] == 0 {
		j++
	}
	return (s[i] + s[j]) / 2
}
