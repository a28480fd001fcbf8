package stats

import (
	"math"
	"slices"

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
			drops = append(drops, float64(up.DropLoss+up.DropQueue+up.DropCorrupt+up.DropOff+
				dn.DropLoss+dn.DropQueue+dn.DropCorrupt+dn.DropOff))
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
	// RelDiff is (median A - median B) / median B.
	RelDiff float64
	Welch   TTest
	MWU     UTest
	// PWelch and P are the Holm-adjusted p-values of Welch and of
	// Mann-Whitney over the family of comparisons (set by AdjustHolm).
	PWelch, P float64
	// Cliff is Cliff's delta P(A > B) - P(A < B); Magnitude its label.
	Cliff     float64
	Magnitude string
	// Verdict is decided by P at Config.Alpha (set by AdjustHolm).
	Verdict Verdict
	// Rule is the page-load rule over the pairs.
	Rule PairRule
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

// Compare compares two cells measured with the same metric. Samples are
// paired when they have the same iteration and emulator seed. The Holm
// adjusted p-values and the verdict are left for AdjustHolm, which needs the
// whole family; until then P and PWelch equal the raw p-values and Verdict is
// decided on the raw p-value.
func Compare(a, b *CellStats, c Config) *Comparison {
	c = c.WithDefaults()
	av, bv := a.Values(), b.Values()
	cmp := &Comparison{A: a, B: b, RelDiff: math.NaN(), PairedDiff: math.NaN(), PairedDiffCI: nanInterval}
	if mb := b.Summary.Median; mb != 0 && !math.IsNaN(mb) {
		cmp.RelDiff = (a.Summary.Median - mb) / math.Abs(mb)
	}
	cmp.Welch = Welch(av, bv)
	cmp.MWU = MannWhitney(av, bv)
	cmp.Cliff = CliffsDelta(av, bv)
	cmp.Magnitude = Magnitude(cmp.Cliff)

	type key struct {
		iter int
		seed uint64
	}
	bi := make(map[key]float64, len(b.Samples))
	for _, s := range b.Samples {
		bi[key{s.Iteration, s.Seed}] = s.Value
	}
	var diffs []float64
	var aWins, bWins int
	higher := a.Cell.HigherIsBetter
	for _, s := range a.Samples {
		y, ok := bi[key{s.Iteration, s.Seed}]
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
	cmp.Pairs = len(diffs)
	cmp.Rule = PairRule{Pairs: len(diffs), Outcome: Insufficient}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		cmp.PairedDiff = QuantileSorted(diffs, 0.5)
		cmp.PairedDiffCI = BootstrapMedianCI(diffs, c.Level, c.Resamples, c.Seed, StreamOf(a.Cell.Key+"\x00"+b.Cell.Key))
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
	cmp.P, cmp.PWelch = cmp.MWU.P, cmp.Welch.P
	cmp.decide(c.Alpha)
	return cmp
}

// clearlyBetter reports whether x is at least margin better than y.
func clearlyBetter(x, y, margin float64, higherIsBetter bool) bool {
	if higherIsBetter {
		return x*(1-margin) >= y && x > y
	}
	return x <= (1-margin)*y && x < y
}

func (cmp *Comparison) decide(alpha float64) {
	switch {
	case cmp.A.Summary.N < 2 || cmp.B.Summary.N < 2 || math.IsNaN(cmp.P):
		cmp.Verdict = Insufficient
	case cmp.P >= alpha || cmp.Cliff == 0:
		cmp.Verdict = NoDifference
	case (cmp.Cliff < 0) != cmp.A.Cell.HigherIsBetter:
		cmp.Verdict = ABetter
	default:
		cmp.Verdict = BBetter
	}
}

// AdjustHolm adjusts the p-values of the comparisons as one family with
// Holm's method and sets each verdict at alpha (0 means the default).
// Comparisons with too few samples are left out of the family.
func AdjustHolm(cs []*Comparison, alpha float64) {
	if alpha == 0 {
		alpha = Default().Alpha
	}
	raw := make([]float64, len(cs))
	rawW := make([]float64, len(cs))
	for i, c := range cs {
		raw[i], rawW[i] = math.NaN(), math.NaN()
		if c.A.Summary.N >= 2 && c.B.Summary.N >= 2 {
			raw[i], rawW[i] = c.MWU.P, c.Welch.P
		}
	}
	adj, adjW := Holm(raw), Holm(rawW)
	for i, c := range cs {
		c.P, c.PWelch = adj[i], adjW[i]
		c.decide(alpha)
	}
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

// Text is the verdict phrased for the reader, e.g. "QUIC faster".
func (cmp *Comparison) Text() string {
	a, b := cmp.Names()
	return cmp.Verdict.Text(a, b, cmp.A.Cell.HigherIsBetter)
}
