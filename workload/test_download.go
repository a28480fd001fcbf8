package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestDownload, run{builtin: download}) }

// download fetches p.Size bytes on a fresh connection.
func download(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	fr, res, size, err := fetchBytes(ctx, spec, p.Size)
	if err != nil {
		return res, err
	}
	r := fr.Requests[0]
	if r.Bytes != size {
		return res, fmt.Errorf("received %d bytes, want %d", r.Bytes, size)
	}
	transferMetrics(res, fr, r, r.Sent, r.Bytes)
	return res, nil
}

// transferMetrics records the metrics of a transfer of bytes by request r
// that started at from: its completion from the connection's start, its
// duration and its goodput.
func transferMetrics(res *Result, fr *endpoint.FetchResult, r endpoint.RequestTiming, from, bytes int64) {
	c, _ := connOf(fr, r)
	res.Metrics["completion_ms"] = Ms(r.End - c.Start)
	res.Metrics["transfer_ms"] = Ms(r.End - from)
	res.Metrics["goodput_mbps"] = GoodputMbps(bytes, time.Duration(r.End-from))
	res.Metrics["bytes"] = float64(bytes)
}
