package competing

import (
	"time"

	"github.com/quicbench/quicbench/model"
)

// SteadyFraction is the part of a fairness sample's duration that its
// shares and Jain's index are computed over: the last two thirds. The
// first third is left to slow start and to the flows' convergence.
const SteadyFraction = 2.0 / 3.0

// Jain returns Jain's fairness index of the throughputs x:
// (sum x)^2 / (n * sum x^2), 1 when all are equal, 1/n when one flow has
// everything. It is 0 for no flows or when nothing moved.
func Jain(x []float64) float64 {
	var s, s2 float64
	for _, v := range x {
		s += v
		s2 += v * v
	}
	if len(x) == 0 || s2 == 0 {
		return 0
	}
	return s * s / (float64(len(x)) * s2)
}

// Share is one flow's part of a fairness sample.
type Share struct {
	Label      string
	GoodputMbs float64 // mean goodput over the steady part, Mbit/s
	Share      float64 // its part of all flows' steady goodput (0..1)
}

// Summary is what a fairness sample measured over its steady part.
type Summary struct {
	Flows       []Share
	Jain        float64 // Jain's index of the flows' steady goodputs
	TotalMbps   float64 // all flows' steady goodput
	SteadyStart time.Duration
	SteadyEnd   time.Duration
}

// Summarize computes the steady part's goodputs, shares and Jain's index
// of flows whose bins are bin wide: the steady part is the bins that start
// at or after (1-SteadyFraction) of the duration covered by whole bins.
func Summarize(flows []FlowResult, bin time.Duration) Summary {
	n := 0
	for _, f := range flows {
		n = max(n, len(f.Bins))
	}
	from := n - int(float64(n)*SteadyFraction+0.5)
	sum := Summary{SteadyStart: time.Duration(from) * bin, SteadyEnd: time.Duration(n) * bin}
	var x []float64
	secs := (time.Duration(n-from) * bin).Seconds()
	for _, f := range flows {
		var b int64
		for i := from; i < len(f.Bins); i++ {
			b += f.Bins[i]
		}
		g := 0.0
		if secs > 0 {
			g = float64(b) * 8 / secs / 1e6
		}
		x = append(x, g)
		sum.Flows = append(sum.Flows, Share{Label: f.Label, GoodputMbs: g})
		sum.TotalMbps += g
	}
	for i := range sum.Flows {
		if sum.TotalMbps > 0 {
			sum.Flows[i].Share = sum.Flows[i].GoodputMbs / sum.TotalMbps
		}
	}
	sum.Jain = Jain(x)
	return sum
}

// SeriesThroughput is the timeline kind of a flow's goodput: V = Mbit/s
// received in the bin starting at T, Label = the flow.
const SeriesThroughput = "throughput"

// Series turns a flow's bins into a throughput timeline whose points are
// the bins from the session's time from onwards (T relative to from) up to
// to (0: to the end).
func Series(f FlowResult, bin, from, to time.Duration) model.Series {
	s := model.Series{Kind: SeriesThroughput, Label: f.Label, Points: []model.Point{}}
	for i, b := range f.Bins {
		t := time.Duration(i) * bin
		if t < from || (to > 0 && t >= to) {
			continue
		}
		s.Points = append(s.Points, model.Point{T: int64(t - from), V: float64(b) * 8 / bin.Seconds() / 1e6})
	}
	return s
}

// Tolerances of the physics checks (docs/metrics.md).
const (
	// FairTolerance is the least Jain's index of two identical flows over
	// a shared bottleneck's steady part that the tests accept.
	FairTolerance = 0.9
	// CapacityMargin is how far above the bottleneck's rate the flows'
	// summed goodput over a window may be measured: bytes the link
	// delivered just before the window and read in it.
	CapacityMargin = 1.02
)

// FlowResult is what one flow's receiver counted.
type FlowResult struct {
	Flow  Flow    // the flow (Count 1)
	Index int     // its position among the session's flows, from 0
	Label string  // Flow.Label, with "#N" when the spec had several alike
	Bins  []int64 // bytes received in each bin from the session's start
	Bytes int64   // all bytes received
	Err   string  // why the flow failed, "" when it ran until stopped
}
