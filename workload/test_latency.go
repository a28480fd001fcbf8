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
	define(plan.TestLatency, run{builtin: latency, bench: &benchRun{
		query: func(p plan.Params) url.Values {
			return url.Values{"requests": {strconv.Itoa(p.Requests)}, "size": {strconv.FormatInt(p.Size, 10)}}
		},
		metrics: benchLatency,
	}})
}

// latency takes p.Requests requests of p.Size bytes (an /echo when 0) over
// one connection warmed up first.
func latency(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	n, size := p.Requests, p.Size
	spec.Paths = []string{"/echo"}
	if size > 0 {
		spec.Paths = []string{fmt.Sprintf("/bytes/%d", size)}
	}
	spec.Repeat, spec.Warm = n, true
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	lat := make([]float64, len(fr.Requests))
	starts := make([]int64, len(fr.Requests))
	for i, r := range fr.Requests {
		lat[i], starts[i] = Ms(r.End-r.Start), r.Start
	}
	latencyMetrics(res, lat, starts)
	return res, nil
}

// latencyMetrics records the latency metrics of requests that started at
// starts (ns) and took lat (ms), in the order they were taken.
func latencyMetrics(res *Result, lat []float64, starts []int64) {
	sorted := append([]float64(nil), lat...)
	sort.Float64s(sorted)
	var sum float64
	for _, v := range lat {
		sum += v
	}
	res.Metrics["latency_ms"] = sum / float64(len(lat))
	res.Metrics["latency_p50_ms"] = NearestRank(sorted, 0.5)
	res.Metrics["latency_p95_ms"] = NearestRank(sorted, 0.95)
	res.Metrics["latency_max_ms"] = sorted[len(sorted)-1]
	if j, ok := Jitter(lat); ok { // absent, not 0, for a single request
		res.Metrics["jitter_ms"] = j
	}
	res.Metrics["requests"] = float64(len(lat))
	pts := make([]model.Point, len(lat))
	for i := range lat {
		pts[i] = model.Point{T: starts[i], V: lat[i]}
	}
	res.Timelines = append(res.Timelines, model.Series{Kind: "latency", Label: "request latency (ms)", Points: pts})
}

// benchLatency: the page took one unmeasured /echo on the connection that
// loaded it, then p.Requests requests one after the other, each from its
// fetch() call to its last body byte read. Each must have used a
// connection that was open already.
func benchLatency(b *benchData, p plan.Params, res *Result) error {
	reqs, err := b.requestsOf(p.Requests)
	if err != nil {
		return err
	}
	lat := make([]float64, len(reqs))
	starts := make([]int64, len(reqs))
	for i, q := range reqs {
		if e := b.entry(q.Name); e.ConnectEnd > e.ConnectStart {
			return &InvalidError{Reason: fmt.Sprintf("request %s opened a new connection (%s ms), not one that was open already", q.Name, fmtMs(e.ConnectEnd-e.ConnectStart))}
		}
		if p.Size > 0 && q.Bytes != p.Size {
			return fmt.Errorf("request %s: received %d bytes, want %d", q.Name, q.Bytes, p.Size)
		}
		lat[i], starts[i] = q.End-q.Start, msToNs(q.Start)
	}
	latencyMetrics(res, lat, starts)
	return nil
}
