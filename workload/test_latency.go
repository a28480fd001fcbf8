package workload

import (
	"context"
	"fmt"
	"sort"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestLatency, run{builtin: latency}) }

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
	lat := make([]float64, 0, len(fr.Requests))
	for _, r := range fr.Requests {
		lat = append(lat, Ms(r.End-r.Start))
	}
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
	pts := make([]model.Point, len(fr.Requests))
	for i, r := range fr.Requests {
		pts[i] = model.Point{T: r.Start, V: lat[i]}
	}
	res.Timelines = append(res.Timelines, model.Series{Kind: "latency", Label: "request latency (ms)", Points: pts})
	return res, nil
}
