package stats

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// Verdict is the outcome of a comparison of A with B.
type Verdict int

// Verdicts.
const (
	Insufficient Verdict = iota // too few valid samples (or pairs) to decide
	NoDifference                // not significant (or, for the page-load rule, a tie)
	ABetter                     // A is significantly better than B
	BBetter                     // B is significantly better than A
	// Negligible: the 95% interval of the difference lies within the
	// smallest effect of interest (Config.MinEffect), whatever the test
	// says: equivalent for practical purposes (Effect, ClassifyEffect).
	Negligible
)

// Text phrases v for two sides named a and b: "a faster" / "b faster" when
// lower values are better (times), "a better" / "b better" otherwise.
func (v Verdict) Text(a, b string, higherIsBetter bool) string {
	word := " faster"
	if higherIsBetter {
		word = " better"
	}
	switch v {
	case ABetter:
		return a + word
	case BBetter:
		return b + word
	case NoDifference:
		return "no significant difference"
	case Negligible:
		return "negligible"
	}
	return "too few samples"
}

// CellStats is one cell with its valid samples and their summaries.
type CellStats struct {
	Cell *model.Cell
	// Samples are the counted valid samples (status ok, not warm-up, finite
	// value), by iteration.
	Samples []*model.Sample
	// Failed are the counted samples that are not valid: failed, invalid, or
	// ok with a non-finite value.
	Failed    []*model.Sample
	Warmups   int // warm-up samples (never counted)
	Summary   Summary
	Transport TransportSummary
}

// Values returns the primary metric of the valid samples, by iteration.
func (c *CellStats) Values() []float64 {
	v := make([]float64, len(c.Samples))
	for i, s := range c.Samples {
		v[i] = s.Value
	}
	return v
}

// Representative returns the valid sample whose value is nearest the median
// (the lowest iteration on ties), or nil when there is none. The report draws
// timelines and waterfalls from it.
func (c *CellStats) Representative() *model.Sample {
	var best *model.Sample
	bestD := math.Inf(1)
	for _, s := range c.Samples {
		if d := math.Abs(s.Value - c.Summary.Median); d < bestD {
			best, bestD = s, d
		}
	}
	return best
}

// TransportSummary holds medians over a cell's valid samples of the
// per-sample transport figures that explain a difference. A per-sample
// figure sums (counts) or averages (RTT, cwnd) over the sample's
// connections. Fields are NaN when no sample carries the figure.
type TransportSummary struct {
	Connections   float64 // connections per sample
	Retransmits   float64 // retransmitted segments or packets
	PacketsLost   float64
	PTOs          float64 // QUIC probe timeouts / TCP RTO timeouts
	SmoothedRTTms float64
	MinRTTms      float64
	CwndBytes     float64 // final congestion window
	LinkDrops     float64 // emulator drops, both directions, all causes
	QueueDelayMs  float64 // mean emulator queue delay over delivered packets, both directions
	CPUms         float64 // client + server CPU time
}

func summarizeTransport(samples []*model.Sample) TransportSummary {
	var conns, retr, lost, pto, srtt, minrtt, cwnd, drops, qd, cpu []float64
	for _, s := range samples {
		var r, l, p, sr, mr, cw float64
		var nsr, ncw int
		ptoKnown := true // every connection reported its PTO count
		mr = math.Inf(1)
		for _, t := range s.Transport {
			r += float64(t.Retransmits)
			l += float64(t.PacketsLost)
			p += float64(t.PTOCount)
			ptoKnown = ptoKnown && t.PTOCount != model.NotMeasured
			if t.SmoothedRTTms > 0 {
				sr += t.SmoothedRTTms
				nsr++
			}
			if t.MinRTTms > 0 {
				mr = math.Min(mr, t.MinRTTms)
			}
			if t.CwndBytes > 0 {
				cw += float64(t.CwndBytes)
				ncw++
			}
		}
		if n := len(s.Transport); n > 0 {
			conns = append(conns, float64(n))
			retr = append(retr, r)
			lost = append(lost, l)
			if ptoKnown {
				pto = append(pto, p)
			}
		}
		if nsr > 0 {
			srtt = append(srtt, sr/float64(nsr))
		}
		if !math.IsInf(mr, 1) {
			minrtt = append(minrtt, mr)
		}
		if ncw > 0 {
			cwnd = append(cwnd, cw/float64(ncw))
		}
		up, dn := s.LinkUp, s.LinkDown
		if up.PacketsIn+dn.PacketsIn > 0 {
			drops = append(drops, float64(up.DropLoss+up.DropQueue+up.DropCorrupt+up.DropOff+up.DropMTU+
				dn.DropLoss+dn.DropQueue+dn.DropCorrupt+dn.DropOff+dn.DropMTU))
			if out := up.PacketsOut + dn.PacketsOut; out > 0 {
				qd = append(qd, float64(up.QueueDelaySumNs+dn.QueueDelaySumNs)/float64(out)/1e6)
			}
		}
		if t := s.CPU.Total(); t > 0 {
			cpu = append(cpu, float64(t)/1e6)
		}
	}
	return TransportSummary{
		Connections: Median(conns), Retransmits: Median(retr), PacketsLost: Median(lost), PTOs: Median(pto),
		SmoothedRTTms: Median(srtt), MinRTTms: Median(minrtt), CwndBytes: Median(cwnd),
		LinkDrops: Median(drops), QueueDelayMs: Median(qd), CPUms: Median(cpu),
	}
}

// Method is the test that decides a comparison.
type Method int

// Methods.
const (
	NoTest            Method = iota // fewer than two valid samples on a side: nothing tested
	SignedRankExact                 // Wilcoxon signed-rank test of the paired differences, exact sign-flip distribution
	SignedRankNormal                // the same, normal approximation (more than MaxExactPairs pairs)
	MannWhitneyExact                // Mann-Whitney U test, exact distribution
	MannWhitneyNormal               // Mann-Whitney U test, normal approximation
)

// String names the method as the report prints it.
func (m Method) String() string {
	switch m {
	case SignedRankExact:
		return "signed-rank exact"
	case SignedRankNormal:
		return "signed-rank normal"
	case MannWhitneyExact:
		return "Mann-Whitney exact"
	case MannWhitneyNormal:
		return "Mann-Whitney normal"
	}
	return "none"
}

// Paired reports whether the method tests paired differences.
func (m Method) Paired() bool { return m == SignedRankExact || m == SignedRankNormal }

// Test is one two-sided test of A against B: which test, on how many
// values, its p-value before correction, the smallest p-value its design
// can give, and the direction of the difference.
type Test struct {
	Method Method
	// N1 and N2 are the number of pairs (both) for a paired test, the
	// sample sizes of A and B for Mann-Whitney.
	N1, N2 int
	P      float64 // two-sided p-value before correction; NaN without a test
	// MinP is the smallest two-sided p-value the test can give with these
	// sizes, whatever the values (SignFlipMinP, MannWhitneyMinP); 1
	// without a test.
	MinP float64
	Dir  int // -1: A tends to be lower than B; +1: higher; 0: neither
}

// Label describes the test for the reader: "signed-rank exact, 12 pairs",
// "Mann-Whitney exact, 5+4", "none".
func (t Test) Label() string {
	switch {
	case t.Method == NoTest:
		return t.Method.String()
	case t.Method.Paired():
		return fmt.Sprintf("%s, %d pairs", t.Method, t.N1)
	}
	return fmt.Sprintf("%s, %d+%d", t.Method, t.N1, t.N2)
}

// PairedDesign reports whether a comparison whose sides have na and nb
// values, pairs of them matched by iteration and seed, is tested as paired:
// at least two pairs, holding at least half of the values of each side.
// Otherwise (partners failed, a resumed run lost them, runs with different
// seeds) the sides are compared as independent samples.
func PairedDesign(pairs, na, nb int) bool { return pairs >= 2 && 2*pairs >= max(na, nb) }

// runTest tests A's values av against B's bv, or their paired differences
// diffs when the design is paired.
func runTest(av, bv, diffs []float64) Test {
	if len(av) < 2 || len(bv) < 2 {
		return Test{Method: NoTest, P: math.NaN(), MinP: 1}
	}
	if n := len(diffs); PairedDesign(n, len(av), len(bv)) {
		sr := SignedRank(diffs)
		m := SignedRankExact
		if !sr.Exact && (sr.N > 0 || n > MaxExactPairs) {
			m = SignedRankNormal
		}
		return Test{Method: m, N1: n, N2: n, P: sr.P, MinP: SignFlipMinP(n), Dir: sr.Dir()}
	}
	u := MannWhitney(av, bv)
	m := MannWhitneyNormal
	if u.Exact {
		m = MannWhitneyExact
	}
	dir := 0
	if d := CliffsDelta(av, bv); d < 0 {
		dir = -1
	} else if d > 0 {
		dir = 1
	}
	return Test{Method: m, N1: len(av), N2: len(bv), P: u.P, MinP: MannWhitneyMinP(len(av), len(bv)), Dir: dir}
}

// Comparison compares cell A with cell B on their primary metric. Differences
// are A - B. A is the QUIC cell when exactly one of the two runs over QUIC.
type Comparison struct {
	A, B *CellStats
	// Pairs is the number of iterations where both cells have a valid sample
	// taken with the same emulator seed.
	Pairs int
	// PairedDiff is the median over pairs of A - B, with its bootstrap
	// interval; NaN without pairs.
	PairedDiff   float64
	PairedDiffCI Interval
	// HL is the Hodges-Lehmann estimate of the centre of the paired
	// differences, with its interval inverted from the signed-rank test at
	// Config.Level (HodgesLehmann); NaN without pairs, and an interval of
	// NaN when the pairs are too few for the level.
	HL   float64
	HLCI Interval
	// RelDiff is (median A - median B) / median B.
	RelDiff float64
	Welch   TTest
	MWU     UTest
	// Test is the test that decides the verdict: Wilcoxon's signed-rank
	// test of the paired differences when the design is paired
	// (PairedDesign), Mann-Whitney's U test of the valid values otherwise.
	Test Test
	// Family names the comparisons whose p-values were corrected together
	// (AdjustFamily); FamilySize is the number of tests in it.
	Family     string
	FamilySize int
	// P and PWelch are the Holm-adjusted p-values of Test and of Welch's
	// t-test within the family.
	PWelch, P float64
	// MinP is the smallest adjusted p-value the design can reach:
	// min(1, FamilySize·Test.MinP), Holm's adjustment of the most extreme
	// outcome when it comes first in its family.
	MinP float64
	// Needed is, when MinP is not below alpha, the smallest number of pairs
	// (values per side for an unpaired test) that would bring MinP below
	// alpha with the same family size; 0 otherwise.
	Needed int
	// Cliff is Cliff's delta P(A > B) - P(A < B); Magnitude its label.
	Cliff     float64
	Magnitude string
	// Significance is the test's verdict, decided by P, MinP and Test.Dir
	// at Config.Alpha; Verdict is the same unless the difference is
	// negligible (Effect.Class is Inside), then Negligible (see
	// Comparison.Decide).
	Significance Verdict
	Verdict      Verdict
	// Effect is the Hodges-Lehmann estimate and its interval relative to
	// B's median, placed against the smallest effect of interest
	// (Config.MinEffect; MinEffect here, 0 when the rule is off).
	Effect    Effect
	MinEffect float64
	// Rule is the page-load rule over the pairs.
	Rule PairRule
	// Failures compares how often A and B failed.
	Failures Failures
}

// Failures compares the failed (or invalid) counted samples of A and B.
type Failures struct {
	FailedA, CountedA int // failed or invalid samples of A; all counted samples of A
	FailedB, CountedB int
	// P is Fisher's exact two-sided p-value on the table of failed and
	// valid counts (not corrected for multiplicity); 1 when neither failed.
	P float64
	// Differs is set when P is below alpha or the failure rates differ by
	// at least Config.FailGap; Note then says so, e.g. "h2 timed out 6 of
	// 30, h3 0 of 30 (Fisher p 0.024)".
	Differs bool
	Note    string
	// Worst is the comparison's test with every failed sample ranked as the
	// worst value (+Inf for a time, -Inf for a goodput), pairs now matched
	// over all counted samples. WorstP is its Holm-adjusted p-value within
	// the family (over the same variant of every comparison of the family),
	// WorstMinP its smallest reachable adjusted p-value and WorstVerdict its
	// verdict. Equal to the main test when neither side failed.
	Worst        Test
	WorstP       float64
	WorstMinP    float64
	WorstVerdict Verdict
}

// PairRule is the outcome of the page-load study's rule: A is better than B
// when A is at least Margin better than B in at least Share of the paired
// runs ("better": a time at most (1-Margin) times the other's, or a goodput
// at least 1/(1-Margin) times the other's). Neither: a tie.
type PairRule struct {
	Pairs  int
	AShare float64 // share of pairs where A is at least Margin better
	BShare float64 // share of pairs where B is at least Margin better
	// Outcome is ABetter, BBetter, NoDifference (a tie) or Insufficient (no pairs).
	Outcome Verdict
}

type pairKey struct {
	iter int
	seed uint64
}

// Compare compares two cells measured with the same metric. Samples are
// paired when they have the same iteration and emulator seed. The
// correction for multiplicity is left for AdjustFamily, which needs the
// whole family; until then the comparison is a family of one named
// "single" (P and PWelch are the raw p-values).
func Compare(a, b *CellStats, c Config) *Comparison {
	c = c.WithDefaults()
	av, bv := a.Values(), b.Values()
	cmp := &Comparison{A: a, B: b, RelDiff: math.NaN(), PairedDiff: math.NaN(), PairedDiffCI: nanInterval, HL: math.NaN(), HLCI: nanInterval}
	if mb := b.Summary.Median; mb != 0 && !math.IsNaN(mb) {
		cmp.RelDiff = (a.Summary.Median - mb) / math.Abs(mb)
	}
	cmp.Welch = Welch(av, bv)
	cmp.MWU = MannWhitney(av, bv)
	cmp.Cliff = CliffsDelta(av, bv)
	cmp.Magnitude = Magnitude(cmp.Cliff)

	bi := make(map[pairKey]float64, len(b.Samples))
	for _, s := range b.Samples {
		bi[pairKey{s.Iteration, s.Seed}] = s.Value
	}
	var diffs []float64
	var aWins, bWins int
	higher := a.Cell.HigherIsBetter
	for _, s := range a.Samples {
		y, ok := bi[pairKey{s.Iteration, s.Seed}]
		if !ok {
			continue
		}
		x := s.Value
		diffs = append(diffs, x-y)
		if clearlyBetter(x, y, c.Margin, higher) {
			aWins++
		} else if clearlyBetter(y, x, c.Margin, higher) {
			bWins++
		}
	}
	cmp.Test = runTest(av, bv, diffs)
	cmp.Pairs = len(diffs)
	cmp.Rule = PairRule{Pairs: len(diffs), Outcome: Insufficient}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		cmp.PairedDiff = QuantileSorted(diffs, 0.5)
		cmp.PairedDiffCI = BootstrapMedianCI(diffs, c.Level, c.Resamples, c.Seed, StreamOf(a.Cell.Key+"\x00"+b.Cell.Key))
		cmp.HL, cmp.HLCI = HodgesLehmann(diffs, c.Level)
		n := float64(len(diffs))
		cmp.Rule.AShare, cmp.Rule.BShare = float64(aWins)/n, float64(bWins)/n
		switch {
		case cmp.Rule.AShare >= c.Share:
			cmp.Rule.Outcome = ABetter
		case cmp.Rule.BShare >= c.Share:
			cmp.Rule.Outcome = BBetter
		default:
			cmp.Rule.Outcome = NoDifference
		}
	}
	cmp.Failures = compareFailures(a, b, c)
	cmp.MinEffect = math.Max(0, c.MinEffect)
	cmp.Effect = effectOf(cmp, cmp.MinEffect)
	cmp.setFamily("single", 1, 1, c.Alpha)
	cmp.P, cmp.PWelch, cmp.Failures.WorstP = cmp.Test.P, cmp.Welch.P, cmp.Failures.Worst.P
	cmp.Decide(c.Alpha)
	return cmp
}

// compareFailures counts the failures of both sides, tests them with
// Fisher's exact test and runs the test with failures ranked worst.
func compareFailures(a, b *CellStats, c Config) Failures {
	f := Failures{FailedA: len(a.Failed), CountedA: len(a.Samples) + len(a.Failed),
		FailedB: len(b.Failed), CountedB: len(b.Samples) + len(b.Failed)}
	f.P = FisherExact(f.FailedA, f.CountedA-f.FailedA, f.FailedB, f.CountedB-f.FailedB)
	rate := func(k, n int) float64 {
		if n == 0 {
			return 0
		}
		return float64(k) / float64(n)
	}
	ra, rb := rate(f.FailedA, f.CountedA), rate(f.FailedB, f.CountedB)
	f.Differs = f.FailedA+f.FailedB > 0 && (f.P < c.Alpha || math.Abs(ra-rb) >= c.FailGap)
	if f.Differs {
		x, y := a, b
		if rb > ra {
			x, y = b, a
		}
		f.Note = fmt.Sprintf("%s %s %d of %d, %s %d of %d (Fisher p %s)",
			x.Cell.Protocol, failVerb(x.Failed), len(x.Failed), len(x.Samples)+len(x.Failed),
			y.Cell.Protocol, len(y.Failed), len(y.Samples)+len(y.Failed), FormatP(f.P))
	}
	if f.FailedA+f.FailedB == 0 {
		f.Worst = runTest(a.Values(), b.Values(), pairDiffs(a.Samples, b.Samples, nil, nil, 0))
		return f
	}
	worst := math.Inf(1)
	if a.Cell.HigherIsBetter {
		worst = math.Inf(-1)
	}
	withWorst := func(cs *CellStats) []float64 {
		v := cs.Values()
		for range cs.Failed {
			v = append(v, worst)
		}
		return v
	}
	f.Worst = runTest(withWorst(a), withWorst(b), pairDiffs(a.Samples, b.Samples, a.Failed, b.Failed, worst))
	return f
}

// pairDiffs returns the differences A - B over the samples of A and B
// matched by iteration and seed, the failed samples (fa, fb) taking the
// value worst.
func pairDiffs(sa, sb, fa, fb []*model.Sample, worst float64) []float64 {
	bi := make(map[pairKey]float64, len(sb)+len(fb))
	for _, s := range sb {
		bi[pairKey{s.Iteration, s.Seed}] = s.Value
	}
	for _, s := range fb {
		bi[pairKey{s.Iteration, s.Seed}] = worst
	}
	var d []float64
	add := func(s *model.Sample, x float64) {
		if y, ok := bi[pairKey{s.Iteration, s.Seed}]; ok {
			d = append(d, pairedDiff(x, y))
		}
	}
	for _, s := range sa {
		add(s, s.Value)
	}
	for _, s := range fa {
		add(s, worst)
	}
	return d
}

// failVerb says how a side's failed samples failed: "timed out" when every
// one is a timeout, "was invalid" when every one is invalid, else "failed".
func failVerb(failed []*model.Sample) string {
	timeout, invalid := true, true
	for _, s := range failed {
		e := strings.ToLower(s.Error)
		isTimeout := s.Status == model.StatusFailed &&
			(strings.Contains(e, "timeout") || strings.Contains(e, "timed out") || strings.Contains(e, "deadline exceeded"))
		timeout = timeout && isTimeout
		invalid = invalid && s.Status != model.StatusFailed
	}
	switch {
	case timeout:
		return "timed out"
	case invalid:
		return "was invalid"
	}
	return "failed"
}

// FormatP formats a p-value for people: "–" when it is NaN, "<0.0001" below
// 0.0001, four decimals below 0.001 and three decimals otherwise.
func FormatP(p float64) string {
	switch {
	case math.IsNaN(p):
		return "–"
	case p < 0.0001:
		return "<0.0001"
	case p < 0.001:
		return fmt.Sprintf("%.4f", p)
	}
	return fmt.Sprintf("%.3f", p)
}

// clearlyBetter reports whether x is at least margin better than y.
func clearlyBetter(x, y, margin float64, higherIsBetter bool) bool {
	if higherIsBetter {
		return x*(1-margin) >= y && x > y
	}
	return x <= (1-margin)*y && x < y
}

// verdictOf decides a verdict: a side is better when the adjusted p-value
// is below alpha (in the test's direction); otherwise "too few samples"
// when the design cannot reach alpha (minP >= alpha) or nothing was tested,
// and "no significant difference" only when it could have.
func verdictOf(t Test, p, minP, alpha float64, higherIsBetter bool) Verdict {
	switch {
	case t.Method == NoTest || math.IsNaN(p):
		return Insufficient
	case p < alpha && t.Dir != 0:
		if (t.Dir < 0) != higherIsBetter {
			return ABetter
		}
		return BBetter
	case minP >= alpha:
		return Insufficient
	}
	return NoDifference
}

// Decide sets Significance, Verdict and Failures.WorstVerdict from the
// adjusted p-values and the smallest reachable ones at alpha: Verdict is
// Negligible when the difference's interval lies within the smallest effect
// of interest (Effect.Class Inside), else the test's verdict.
func (cmp *Comparison) Decide(alpha float64) {
	h := cmp.A.Cell.HigherIsBetter
	cmp.Significance = verdictOf(cmp.Test, cmp.P, cmp.MinP, alpha, h)
	cmp.Verdict = cmp.Significance
	if cmp.Effect.Class == Inside {
		cmp.Verdict = Negligible
	}
	f := &cmp.Failures
	f.WorstVerdict = verdictOf(f.Worst, f.WorstP, f.WorstMinP, alpha, h)
}

// setFamily records the family of the comparison, its size for the main
// test (m) and for the failures-ranked-worst variant (mw), and derives the
// smallest reachable adjusted p-values and the iterations needed.
func (cmp *Comparison) setFamily(name string, m, mw int, alpha float64) {
	cmp.Family, cmp.FamilySize = name, m
	cmp.MinP = math.Min(1, float64(max(m, 1))*cmp.Test.MinP)
	cmp.Failures.WorstMinP = math.Min(1, float64(max(mw, 1))*cmp.Failures.Worst.MinP)
	cmp.Needed = 0
	if cmp.MinP >= alpha {
		cmp.Needed = NeededIterations(!isUnpaired(cmp.Test.Method), max(m, 1), alpha)
	}
}

func isUnpaired(m Method) bool { return m == MannWhitneyExact || m == MannWhitneyNormal }

// NeededIterations returns the smallest number of pairs (paired) or of
// values per side (unpaired, equal sizes) whose most extreme outcome,
// multiplied by the family size m as Holm's first step does, falls below
// alpha; 0 when none up to 10,000 does. It is the least the design needs
// to be able to decide, not a number that gives power against a given
// difference.
func NeededIterations(paired bool, m int, alpha float64) int {
	for n := 2; n <= 10000; n++ {
		p := MannWhitneyMinP(n, n)
		if paired {
			p = SignFlipMinP(n)
		}
		if float64(m)*p < alpha {
			return n
		}
	}
	return 0
}

// AdjustHolm adjusts the comparisons as one family named "all" (see
// AdjustFamily).
func AdjustHolm(cs []*Comparison, alpha float64) { AdjustFamily(cs, "all", alpha) }

// AdjustFamily adjusts the p-values of the comparisons cs as one family
// named name with Holm's step-down method and decides each verdict at alpha
// (0 means the default). Comparisons without a test are left out of the
// family. The failures-ranked-worst variants are adjusted as a family of
// their own over the same comparisons.
func AdjustFamily(cs []*Comparison, name string, alpha float64) {
	if alpha == 0 {
		alpha = Default().Alpha
	}
	raw := make([]float64, len(cs))
	rawW := make([]float64, len(cs))
	rawX := make([]float64, len(cs))
	m, mw := 0, 0
	for i, c := range cs {
		raw[i], rawW[i], rawX[i] = math.NaN(), math.NaN(), c.Failures.Worst.P
		if c.Test.Method != NoTest {
			raw[i], rawW[i] = c.Test.P, c.Welch.P
		}
		if !math.IsNaN(raw[i]) {
			m++
		}
		if c.Failures.Worst.Method == NoTest {
			rawX[i] = math.NaN()
		}
		if !math.IsNaN(rawX[i]) {
			mw++
		}
	}
	adj, adjW, adjX := Holm(raw), Holm(rawW), Holm(rawX)
	for i, c := range cs {
		c.P, c.PWelch, c.Failures.WorstP = adj[i], adjW[i], adjX[i]
		c.setFamily(name, m, mw, alpha)
		c.Decide(alpha)
	}
}

// Notes are the remarks a verdict carries: the iterations a design that
// cannot reach alpha would need, and a difference in failures.
func (cmp *Comparison) Notes() []string {
	var out []string
	if cmp.Verdict == Insufficient && cmp.Needed > 0 {
		unit := "pairs"
		if isUnpaired(cmp.Test.Method) {
			unit = "per protocol"
		}
		out = append(out, fmt.Sprintf("needs %d %s", cmp.Needed, unit))
	}
	if cmp.Failures.Note != "" {
		out = append(out, cmp.Failures.Note)
	}
	return out
}

// Names returns the labels of A and B as a verdict should read them: "QUIC"
// and "TCP" when A runs over QUIC and B over TCP, else the protocol names.
func (cmp *Comparison) Names() (a, b string) {
	pa, pb := cmp.A.Cell.Protocol, cmp.B.Cell.Protocol
	if model.IsQUIC(pa) && !model.IsQUIC(pb) {
		return "QUIC", "TCP"
	}
	return pa, pb
}

// Text is the verdict phrased for the reader with its notes, e.g. "QUIC
// faster", "h1 faster, possibly negligible", "negligible (within ±5%)",
// "too few samples (needs 11 pairs)" or "h3 faster; h2 timed out 6 of 30,
// h3 0 of 30 (Fisher p 0.024)".
func (cmp *Comparison) Text() string {
	s := cmp.Headline()
	notes := cmp.Notes()
	if cmp.Verdict == Insufficient && cmp.Needed > 0 {
		s += " (" + notes[0] + ")"
		notes = notes[1:]
	}
	for _, n := range notes {
		s += "; " + n
	}
	return s
}

// Headline is the verdict phrased for the reader without its notes: "QUIC
// faster", "h1 faster, possibly negligible", "negligible (within ±5%)",
// "no significant difference" or "too few samples".
func (cmp *Comparison) Headline() string {
	a, b := cmp.Names()
	return cmp.HeadlineAs(a, b)
}

// HeadlineAs is Headline with the sides named a and b, for comparisons
// whose sides are not protocols (two runs, two implementations).
func (cmp *Comparison) HeadlineAs(a, b string) string {
	switch {
	case cmp.Verdict == Negligible:
		return negligibleText(cmp.MinEffect)
	case cmp.PossiblyNegligible():
		return cmp.Verdict.Text(a, b, cmp.A.Cell.HigherIsBetter) + ", possibly negligible"
	}
	return cmp.Verdict.Text(a, b, cmp.A.Cell.HigherIsBetter)
}

// WorstText is the verdict of the variant with failures ranked worst.
func (cmp *Comparison) WorstText() string {
	a, b := cmp.Names()
	return cmp.Failures.WorstVerdict.Text(a, b, cmp.A.Cell.HigherIsBetter)
}
