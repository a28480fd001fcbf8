package workload

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

func init() {
	define(plan.TestMultiplex, run{builtin: multiplex, bench: &benchRun{
		query: func(p plan.Params) url.Values {
			return url.Values{"objects": {strconv.Itoa(p.Objects)}, "size": {strconv.FormatInt(p.Size, 10)}}
		},
		metrics: benchMultiplex,
	}})
}

// multiplex requests p.Objects objects of p.Size bytes in parallel.
func multiplex(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	n, size := p.Objects, p.Size
	spec.Paths = make([]string, n)
	for i := range spec.Paths {
		// distinct paths (a query string the server ignores) keep every
		// request a separate resource, as a page's objects are
		spec.Paths[i] = fmt.Sprintf("/bytes/%d?object=%d", size, i)
	}
	spec.Parallel = n
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	streams := make([]stream, len(fr.Requests))
	for i, r := range fr.Requests {
		chunks := make([]Chunk, len(r.Chunks))
		for j, c := range r.Chunks {
			chunks[j] = Chunk{T: c.T, N: int64(c.Bytes)}
		}
		streams[i] = stream{start: r.Start, end: r.End, chunks: chunks}
	}
	multiplexMetrics(res, streams, n)
	return res, nil
}

// stream is one of the parallel requests of the multiplex test: its start
// and end and the chunks of its body, in ns from the measured part's start.
type stream struct {
	start, end int64
	chunks     []Chunk
}

// multiplexMetrics records the metrics and the head-of-line timelines of
// n parallel requests.
func multiplexMetrics(res *Result, streams []stream, n int) {
	starts := make([]int64, len(streams))
	ends := make([]int64, len(streams))
	finish := make([]float64, len(streams))
	var last int64
	for _, s := range streams {
		for _, c := range s.chunks {
			last = max(last, c.T)
		}
	}
	// The timelines' bins adapt to the transfer (a 10 ms transfer and a
	// 16 s one both get up to HOLMaxBins of them); the stall count keeps
	// the fixed HOLBin, so that it means the same for every sample.
	bin := HOLBinFor(last)
	stalls := 0
	for i, s := range streams {
		starts[i], ends[i] = s.start, s.end
		finish[i] = Ms(s.end)
		stalls += EmptyBinsInside(Bins(s.chunks, int64(HOLBin)))
		res.Timelines = append(res.Timelines, model.Series{
			Kind: model.SeriesHOL, Label: fmt.Sprintf("stream %d", i), Points: Bins(s.chunks, bin),
		})
	}
	sort.Float64s(finish)
	res.Metrics["span_ms"] = Ms(Span(starts, ends))
	res.Metrics["finish_p50_ms"] = NearestRank(finish, 0.5)
	res.Metrics["finish_first_ms"] = finish[0]
	res.Metrics["finish_last_ms"] = finish[len(finish)-1]
	res.Metrics["objects"] = float64(n)
	res.Metrics["hol_empty_bins"] = float64(stalls)
}

// benchMultiplex: the page started p.Objects fetches of distinct
// /bytes/SIZE resources at once and read each body through a stream
// reader, recording its chunks' arrivals (chunks arriving within 0.1 ms of
// the previous record are merged into it); each request is timed from its
// fetch() call to its last chunk.
func benchMultiplex(b *benchData, p plan.Params, res *Result) error {
	reqs, err := b.requestsOf(p.Objects)
	if err != nil {
		return err
	}
	streams := make([]stream, len(reqs))
	for i, q := range reqs {
		if q.Bytes != p.Size {
			return fmt.Errorf("%s: received %d bytes, want %d", q.Name, q.Bytes, p.Size)
		}
		streams[i] = stream{start: msToNs(q.Start), end: msToNs(q.End), chunks: chunksOf(q)}
	}
	multiplexMetrics(res, streams, p.Objects)
	return nil
}
