package calibrate

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/quicbench/quicbench/emu/spec"
)

// dist summarizes a sample of one-way delays (ns).
type dist struct {
	n             int
	p50, p99, max float64
	mean, std     float64
}

// summarize sorts xs in place and returns its quantiles (linear
// interpolation between order statistics, Hyndman-Fan type 7), mean and
// standard deviation.
func summarize(xs []float64) dist {
	if len(xs) == 0 {
		return dist{}
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	std := 0.0
	if len(xs) > 1 {
		std = math.Sqrt(ss / float64(len(xs)-1))
	}
	return dist{n: len(xs), p50: quantile(xs, 0.5), p99: quantile(xs, 0.99), max: xs[len(xs)-1], mean: mean, std: std}
}

// quantile of sorted xs (type 7).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	h := q * float64(len(sorted)-1)
	lo := int(math.Floor(h))
	if lo >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// clopperPearson is the exact two-sided binomial confidence interval, of
// confidence level 1-alpha, of a proportion with k successes in n trials. It
// is conservative (coverage at least 1-alpha for every p).
func clopperPearson(k, n int, alpha float64) (lo, hi float64) {
	if n <= 0 {
		return 0, 1
	}
	if k > 0 {
		lo = distuv.Beta{Alpha: float64(k), Beta: float64(n - k + 1)}.Quantile(alpha / 2)
	}
	hi = 1
	if k < n {
		hi = distuv.Beta{Alpha: float64(k + 1), Beta: float64(n - k)}.Quantile(1 - alpha/2)
	}
	return lo, hi
}

// longRunLoss is the stationary loss probability (0..1) of a loss model,
// and whether losses are independent from packet to packet (only then does
// a binomial interval apply).
func longRunLoss(l spec.Loss) (p float64, independent bool) {
	switch l.Model {
	case spec.LossNone:
		return 0, true
	case spec.LossRandom:
		return l.Percent / 100, l.Correlation == 0
	case spec.LossGemodel:
		P, R, bad, good := l.P/100, l.R/100, l.BadLoss/100, l.GoodLoss/100
		if P+R == 0 {
			return good, true // never leaves the good state
		}
		// Memoryless only when the next state does not depend on the
		// current one (P + R = 1) or both states lose alike.
		return (R*good + P*bad) / (P + R), P+R == 1 || good == bad
	case spec.LossState:
		return stateLoss(l), false
	}
	return 0, false
}

// stateLoss is the stationary loss rate of netem's 4-state model: the
// fraction of packets that leave the chain in state 3 (burst loss) or 4
// (isolated loss), found by power iteration.
func stateLoss(l spec.Loss) float64 {
	p13, p31, p32, p23, p14 := l.P13/100, l.P31/100, l.P32/100, l.P23/100, l.P14/100
	// Transition matrix T[from][to], states 1..4 as 0..3, netem's rules.
	var T [4][4]float64
	T[0][2], T[0][3], T[0][0] = p13, p14, 1-p13-p14
	T[1][2], T[1][1] = p23, 1-p23
	T[2][0], T[2][1], T[2][2] = p31, p32, 1-p31-p32
	T[3][0] = 1
	pi := [4]float64{1, 0, 0, 0}
	for range 100000 {
		var next [4]float64
		for i := range 4 {
			for j := range 4 {
				next[j] += pi[i] * T[i][j]
			}
		}
		// Average with the previous step so periodic chains converge.
		var diff float64
		for j := range 4 {
			next[j] = (next[j] + pi[j]) / 2
			diff += math.Abs(next[j] - pi[j])
		}
		pi = next
		if diff < 1e-15 {
			break
		}
	}
	return pi[2] + pi[3]
}

// undeliveredProb is the probability that a packet yields no intact copy
// at the receiver, for independent loss p, duplication d and corruption c
// (netem's rule: a duplicated packet that is also lost sends one copy; a
// corrupted copy is dropped by the receiver's checksum).
func undeliveredProb(p, d, c float64) float64 {
	return (1-d)*(p+(1-p)*c) + d*(p*c+(1-p)*c*c)
}

// duplicateProb is the probability that a packet yields two intact copies.
func duplicateProb(p, d, c float64) float64 { return d * (1 - p) * (1 - c) * (1 - c) }

// earlyFraction is the long-run fraction of packets that netem's reorder
// sends early: after an early packet, gap-1 packets go the normal way, then
// each one is early with probability r; a cycle is (gap-1) + 1/r packets
// long and holds one early packet.
func earlyFraction(r float64, gap uint32) float64 {
	if r <= 0 {
		return 0
	}
	if gap == 0 {
		gap = 1
	}
	return r / (1 + float64(gap-1)*r)
}

// wireBytes is the size a packet of size bytes occupies on a rate-limited
// link (packet overhead and cells, as the emulator's serializer computes).
func wireBytes(l spec.Link, size int) float64 {
	n := int64(size) + int64(l.PacketOverhead)
	if l.CellSize > 0 {
		cells := (max(n, 0) + int64(l.CellSize) - 1) / int64(l.CellSize)
		n = cells * (int64(l.CellSize) + int64(l.CellOverhead))
	}
	return float64(max(n, 0))
}
