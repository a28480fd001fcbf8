package calibrate

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/stats"
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
	return dist{n: len(xs), p50: stats.QuantileSorted(xs, 0.5), p99: stats.QuantileSorted(xs, 0.99), max: xs[len(xs)-1], mean: mean, std: std}
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
