package workload

import (
	"context"
	"fmt"
	"sort"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestMultiplex, run{builtin: multiplex}) }

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
	starts := make([]int64, len(fr.Requests))
	ends := make([]int64, len(fr.Requests))
	finish := make([]float64, len(fr.Requests))
	var last int64
	for _, r := range fr.Requests {
		for _, c := range r.Chunks {
			last = max(last, c.T)
		}
	}
	// The timelines' bins adapt to the transfer (a 10 ms transfer and a
	// 16 s one both get up to HOLMaxBins of them); the stall count keeps
	// the fixed HOLBin, so that it means the same for every sample.
	bin := HOLBinFor(last)
	stalls := 0
	for i, r := range fr.Requests {
		starts[i], ends[i] = r.Start, r.End
		finish[i] = Ms(r.End)
		chunks := make([]Chunk, len(r.Chunks))
		for j, c := range r.Chunks {
			chunks[j] = Chunk{T: c.T, N: int64(c.Bytes)}
		}
		stalls += EmptyBinsInside(Bins(chunks, int64(HOLBin)))
		res.Timelines = append(res.Timelines, model.Series{
			Kind: model.SeriesHOL, Label: fmt.Sprintf("stream %d", i), Points: Bins(chunks, bin),
		})
	}
	sort.Float64s(finish)
	res.Metrics["span_ms"] = Ms(Span(starts, ends))
	res.Metrics["finish_p50_ms"] = NearestRank(finish, 0.5)
	res.Metrics["finish_first_ms"] = finish[0]
	res.Metrics["finish_last_ms"] = finish[len(finish)-1]
	res.Metrics["objects"] = float64(n)
	res.Metrics["hol_empty_bins"] = float64(stalls)
	return res, nil
}
