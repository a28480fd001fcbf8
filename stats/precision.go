package stats

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// PrecisionLevel is the confidence level of the interval that the adaptive
// stopping rule judges.
const PrecisionLevel = 0.95

// PairPrecision returns the half-width of the PrecisionLevel confidence
// interval of the Hodges-Lehmann estimate of the paired differences d, as a
// percentage of ref (the median of the pair's values): the "±P%" that an
// adaptive run compares with its target. It is +Inf when the interval
// cannot be given (too few pairs, a non-finite difference) or ref is not a
// positive finite number, so that such a pair never counts as precise.
func PairPrecision(d []float64, ref float64) float64 {
	if !(ref > 0) || math.IsInf(ref, 0) {
		return math.Inf(1)
	}
	_, ci := HodgesLehmann(d, PrecisionLevel)
	if math.IsNaN(ci.Lo) || math.IsNaN(ci.Hi) {
		return math.Inf(1)
	}
	return 100 * (ci.Hi - ci.Lo) / 2 / ref
}

// PairValues is one protocol pair of a cell group as the stopping rule sees
// it: the primary metric of each protocol's valid samples, keyed by
// iteration.
type PairValues struct {
	A, B    string          // protocols
	ByIterA map[int]float64 // iteration -> value of A
	ByIterB map[int]float64 // iteration -> value of B
}

// Precision is the state of the stopping rule for one cell group after
// some iterations: the widest pair's half-width and which pair it is.
type Precision struct {
	Worst     float64 // widest half-width over the group's pairs, % of their median (+Inf when any pair cannot be judged)
	WorstPair string  // "h3 vs h2"
	Pairs     int     // pairs of iterations behind the widest pair's interval
}

// GroupPrecision evaluates the stopping rule's measure for a group: for each
// protocol pair, the half-width of the paired median difference's interval
// as a percentage of the median of the pair's values (PairPrecision), and
// the widest of them. A group with no pair is +Inf.
func GroupPrecision(pairs []PairValues) Precision {
	out := Precision{Worst: math.Inf(-1)}
	if len(pairs) == 0 {
		return Precision{Worst: math.Inf(1)}
	}
	for _, p := range pairs {
		var d, all []float64
		for _, it := range slices.Sorted(maps.Keys(p.ByIterA)) {
			b, ok := p.ByIterB[it]
			if !ok {
				continue
			}
			a := p.ByIterA[it]
			d = append(d, a-b)
			all = append(all, a, b)
		}
		w := PairPrecision(d, math.Abs(Median(all))) // NaN, so +Inf, without pairs
		if w > out.Worst || out.WorstPair == "" {
			out.Worst, out.WorstPair, out.Pairs = w, fmt.Sprintf("%s vs %s", p.A, p.B), len(d)
		}
	}
	return out
}
