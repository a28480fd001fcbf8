package stats

import (
	"math"

	"gonum.org/v1/gonum/stat/combin"
)

// logChoose is ln C(n, k).
func logChoose(n, k int) float64 {
	return combin.LogGeneralizedBinomial(float64(n), float64(k))
}

// FisherExact returns the two-sided p-value of Fisher's exact test of
// independence in the 2×2 table
//
//	a b
//	c d
//
// (for quicbench: failed and valid samples of A in the first row, of B in
// the second). With the margins fixed, the top-left count follows the
// hypergeometric distribution P(x) = C(a+b, x)·C(c+d, a+c-x)/C(n, a+c); the
// p-value sums P(x) over every x no more probable than the observed table
// (relative tolerance 1e-7, as R's fisher.test). It is 1 when a margin is 0
// and NaN for a negative count.
func FisherExact(a, b, c, d int) float64 {
	if a < 0 || b < 0 || c < 0 || d < 0 {
		return math.NaN()
	}
	r1, c1, n := a+b, a+c, a+b+c+d
	if r1 == 0 || c1 == 0 || r1 == n || c1 == n {
		return 1
	}
	logP := func(x int) float64 {
		return logChoose(r1, x) + logChoose(n-r1, c1-x) - logChoose(n, c1)
	}
	obs := logP(a)
	lo, hi := max(0, c1-(n-r1)), min(r1, c1)
	var p float64
	for x := lo; x <= hi; x++ {
		if lp := logP(x); lp <= obs+1e-7 {
			p += math.Exp(lp)
		}
	}
	return math.Min(1, p)
}
