package stats

import (
	"fmt"
	"math"
	"strconv"
)

// Practical places a difference against the smallest effect of interest
// (Config.MinEffect): the band of differences within ±MinEffect of the
// reference that no reader would act on.
type Practical int

// Where a difference's interval lies against the band.
const (
	// PracticalUnknown: no interval to judge (an unpaired design, 5 pairs
	// or fewer, a reference median that is not positive and finite), or
	// the rule is off.
	PracticalUnknown Practical = iota
	// Inside: the whole 95% interval lies within the band: the difference
	// is negligible (equivalence shown by two one-sided tests).
	Inside
	// Crosses: the interval reaches both into and beyond the band.
	Crosses
	// Outside: the whole interval lies beyond the band, on one side.
	Outside
)

// String names the class as docs/statistics.md does.
func (p Practical) String() string {
	switch p {
	case Inside:
		return "inside the band"
	case Crosses:
		return "crosses the band"
	case Outside:
		return "outside the band"
	}
	return "unknown"
}

// Effect is a comparison's difference relative to its reference (B's
// median): the Hodges-Lehmann estimate of the paired differences A - B and
// its interval (Comparison.HL, Comparison.HLCI) divided by |median B|, and
// where that interval lies against the band ±Band (Class).
type Effect struct {
	// Rel is HL / |median B| (0.05: A is 5% above B); NaN without a paired
	// design, pairs or a positive finite reference.
	Rel float64
	// CI is the interval of HL divided by |median B|; NaN ends when the
	// pairs are too few for it (5 or fewer at 95%).
	CI Interval
	// Band is the smallest effect of interest as a fraction (0.05 for
	// ±5%); 0 when the rule is off.
	Band  float64
	Class Practical
}

// ClassifyEffect returns where the interval ci (relative, like Effect.CI)
// lies against the band ±band: Inside when band > 0 and -band <= ci.Lo and
// ci.Hi <= band; Outside when ci.Lo > band or ci.Hi < -band; Crosses
// otherwise; PracticalUnknown for an invalid interval or band <= 0.
//
// Inside is the two one-sided tests procedure (Schuirmann 1987; Lakens
// 2017) carried out with the signed-rank test: the interval is inverted
// from it, so its lower end is above -band exactly when the one-sided
// test of "the shift is at most -band" rejects at (1-level)/2, and its
// upper end below band exactly when "the shift is at least band" is
// rejected at the same level.
func ClassifyEffect(ci Interval, band float64) Practical {
	if !(band > 0) || !ci.Valid() {
		return PracticalUnknown
	}
	switch {
	case ci.Lo >= -band && ci.Hi <= band:
		return Inside
	case ci.Lo > band || ci.Hi < -band:
		return Outside
	}
	return Crosses
}

// effectOf computes cmp's relative effect against the band (band <= 0:
// the rule is off). Only a paired design judges the band: its interval
// comes from the test that decides.
func effectOf(cmp *Comparison, band float64) Effect {
	e := Effect{Rel: math.NaN(), CI: nanInterval, Band: math.Max(0, band)}
	ref := math.Abs(cmp.B.Summary.Median)
	if !cmp.Test.Method.Paired() || math.IsNaN(cmp.HL) || !(ref > 0) || math.IsInf(ref, 0) {
		return e
	}
	e.Rel = cmp.HL / ref
	if cmp.HLCI.Valid() {
		e.CI = Interval{cmp.HLCI.Lo / ref, cmp.HLCI.Hi / ref}
	}
	e.Class = ClassifyEffect(e.CI, e.Band)
	return e
}

// PossiblyNegligible reports whether a significant verdict's interval
// reaches into the band: A (or B) is better, but by how much is not known
// to exceed the smallest effect of interest.
func (cmp *Comparison) PossiblyNegligible() bool {
	return (cmp.Verdict == ABetter || cmp.Verdict == BBetter) && cmp.Effect.Class == Crosses
}

// BandText formats a band as "±5%".
func BandText(band float64) string {
	return "±" + strconv.FormatFloat(100*band, 'g', 4, 64) + "%"
}

// negligibleText is the verdict text of a negligible difference.
func negligibleText(band float64) string {
	return fmt.Sprintf("negligible (within %s)", BandText(band))
}
