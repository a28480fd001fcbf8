package workload

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

func init() {
	define(plan.TestStream, run{builtin: streamTest, bench: &benchRun{
		query: func(p plan.Params) url.Values {
			return url.Values{"segments": {strconv.Itoa(p.Segments)}, "interval": {p.Interval.String()}, "size": {strconv.FormatInt(p.Size, 10)}}
		},
		metrics: benchStream,
	}})
}

// streamTest fetches p.Segments segments of p.Size bytes that the server
// sends p.Interval apart.
func streamTest(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	segs, interval, size := p.Segments, p.Interval, p.Size
	spec.Paths = []string{fmt.Sprintf("/stream?segments=%d&interval=%s&size=%d", segs, interval, size)}
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	r := fr.Requests[0]
	if r.Bytes != int64(segs)*size {
		return res, fmt.Errorf("received %d bytes, want %d segments of %d", r.Bytes, segs, size)
	}
	streamMetrics(res, SegmentArrivals(r.Chunks, size, segs), segs, interval)
	res.Timelines = append(res.Timelines, fr.ChunkSeries()...)
	return res, nil
}

// streamMetrics records the metrics and the inter-arrival timeline of segs
// segments sent interval apart that were complete at arrivals (ns).
func streamMetrics(res *Result, arrivals []int64, segs int, interval time.Duration) {
	st := Intervals(arrivals, 2*interval)
	res.Metrics["interval_p50_ms"] = st.P50
	res.Metrics["interval_p95_ms"] = st.P95
	res.Metrics["interval_max_ms"] = st.Max
	res.Metrics["stalls"] = float64(st.Stalls)
	res.Metrics["segments"] = float64(segs)
	pts := make([]model.Point, len(st.Intervals))
	for i, v := range st.Intervals {
		pts[i] = model.Point{T: arrivals[i+1], V: v}
	}
	res.Timelines = append(res.Timelines, model.Series{Kind: model.SeriesInterval, Label: "segment inter-arrival (ms)", Points: pts})
}

// SegmentArrivals returns the time each of segs segments of size bytes was
// complete, from the chunks of the response (chunk boundaries need not
// match segment boundaries: TCP may merge or split them).
func SegmentArrivals(chunks []endpoint.Chunk, size int64, segs int) []int64 {
	out := make([]int64, 0, segs)
	var got int64
	for _, c := range chunks {
		got += int64(c.Bytes)
		for len(out) < segs && got >= int64(len(out)+1)*size {
			out = append(out, c.T)
		}
	}
	return out
}

// benchStream: the page fetched the /stream response on the connection
// that loaded it and read it through a stream reader, recording every
// chunk's arrival (performance.now() when the read returned).
func benchStream(b *benchData, p plan.Params, res *Result) error {
	reqs, err := b.requestsOf(1)
	if err != nil {
		return err
	}
	q := reqs[0]
	if q.Bytes != int64(p.Segments)*p.Size {
		return fmt.Errorf("received %d bytes, want %d segments of %d", q.Bytes, p.Segments, p.Size)
	}
	chunks := make([]endpoint.Chunk, len(q.Chunks))
	pts := make([]model.Point, len(q.Chunks))
	for i, c := range q.Chunks {
		chunks[i] = endpoint.Chunk{T: msToNs(c[0]), Bytes: int(c[1])}
		pts[i] = model.Point{T: chunks[i].T, V: c[1]}
	}
	streamMetrics(res, SegmentArrivals(chunks, p.Size, p.Segments), p.Segments, p.Interval)
	res.Timelines = append(res.Timelines, model.Series{Kind: model.SeriesChunks, Label: "0 " + q.Name, Points: pts})
	return nil
}
