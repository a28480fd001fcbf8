package workload

import (
	"math"
	"sort"
	"time"

	"github.com/quicbench/quicbench/model"
)

// Chunk is one received piece of a response: when it arrived (ns from the
// sample start) and how many bytes it carried.
type Chunk struct {
	T int64
	N int64
}

// Jitter is the mean absolute difference of consecutive values (RFC 3550
// style, without the exponential smoothing): for latencies l1..lk it is
// sum(|l(i) - l(i-1)|) / (k-1). Fewer than two values have no jitter: ok
// is then false.
func Jitter(latencies []float64) (jitter float64, ok bool) {
	if len(latencies) < 2 {
		return 0, false
	}
	var sum float64
	for i := 1; i < len(latencies); i++ {
		sum += math.Abs(latencies[i] - latencies[i-1])
	}
	return sum / float64(len(latencies)-1), true
}

// GoodputMbps is application bytes delivered per unit of time, in Mbit/s
// (10^6 bit/s). It is 0 when d is not positive.
func GoodputMbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) * 8 / d.Seconds() / 1e6
}

// HOLMaxBins is about how many bins a head-of-line timeline has: the bin
// width adapts to the transfer's duration so that a 10 ms transfer and a
// 16 s one are both drawn in enough detail, and no stored timeline grows
// without bound.
const HOLMaxBins = 100

// HOLBinFor returns the bin width (ns) of the head-of-line timelines of a
// transfer whose last byte arrived at last (ns from the sample start): the
// smallest width of the 1-2-5 series from 100 us up that gives at most
// HOLMaxBins bins.
func HOLBinFor(last int64) int64 {
	bin := int64(100 * time.Microsecond)
	for steps := 0; last/bin >= HOLMaxBins; steps++ {
		switch steps % 3 {
		case 0, 2: // 1 -> 2, 5 -> 10
			bin *= 2
		case 1: // 2 -> 5
			bin = bin / 2 * 5
		}
	}
	return bin
}

// Bins sums the bytes of chunks into fixed bins of width binNs starting at
// time 0 and returns one point per bin from 0 to the bin of the last chunk
// (empty bins included, so stalls show as zeros). Chunks with negative times
// are counted in the first bin.
func Bins(chunks []Chunk, binNs int64) []model.Point {
	if len(chunks) == 0 || binNs <= 0 {
		return nil
	}
	var last int64
	for _, c := range chunks {
		if c.T > last {
			last = c.T
		}
	}
	n := int(last/binNs) + 1
	pts := make([]model.Point, n)
	for i := range pts {
		pts[i].T = int64(i) * binNs
	}
	for _, c := range chunks {
		i := 0
		if c.T > 0 {
			i = int(c.T / binNs)
		}
		pts[i].V += float64(c.N)
	}
	return pts
}

// IntervalStats summarises the gaps between consecutive arrivals.
type IntervalStats struct {
	P50, P95, Max float64 // milliseconds
	Stalls        int     // gaps longer than the stall threshold
	Intervals     []float64
}

// Intervals computes the inter-arrival times (ms) of consecutive arrival
// times (ns), their p50, p95 and max (nearest-rank percentiles), and the
// number of gaps longer than stall. Arrival times are used in the order given.
func Intervals(arrivals []int64, stall time.Duration) IntervalStats {
	var st IntervalStats
	if len(arrivals) < 2 {
		return st
	}
	st.Intervals = make([]float64, 0, len(arrivals)-1)
	for i := 1; i < len(arrivals); i++ {
		d := arrivals[i] - arrivals[i-1]
		st.Intervals = append(st.Intervals, float64(d)/1e6)
		if time.Duration(d) > stall {
			st.Stalls++
		}
	}
	s := append([]float64(nil), st.Intervals...)
	sort.Float64s(s)
	st.P50 = NearestRank(s, 0.50)
	st.P95 = NearestRank(s, 0.95)
	st.Max = s[len(s)-1]
	return st
}

// NearestRank returns the q-quantile (0 < q <= 1) of sorted values by the
// nearest-rank method: the smallest value with at least q of the values at
// or below it. It returns 0 for no values.
func NearestRank(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	r := int(math.Ceil(q*float64(len(sorted)))) - 1
	if r < 0 {
		r = 0
	}
	if r >= len(sorted) {
		r = len(sorted) - 1
	}
	return sorted[r]
}

// Span is the time from the earliest start to the latest end, in ns. It
// returns 0 for no intervals.
func Span(starts, ends []int64) int64 {
	if len(starts) == 0 || len(ends) == 0 {
		return 0
	}
	lo, hi := starts[0], ends[0]
	for _, s := range starts {
		lo = min(lo, s)
	}
	for _, e := range ends {
		hi = max(hi, e)
	}
	return hi - lo
}

// Ms converts nanoseconds to milliseconds.
func Ms(ns int64) float64 { return float64(ns) / 1e6 }

// EmptyBinsInside counts the bins with no bytes between a stream's first and
// last non-empty bin: the 10 ms periods in which a started stream stalled.
func EmptyBinsInside(bins []model.Point) int {
	first, last := -1, -1
	for i, b := range bins {
		if b.V > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	n := 0
	for i := first + 1; i < last; i++ {
		if bins[i].V == 0 {
			n++
		}
	}
	return n
}
