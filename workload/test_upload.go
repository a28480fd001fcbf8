package workload

import (
	"context"
	"fmt"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestUpload, run{builtin: upload}) }

// upload sends a request body of p.Size bytes on a fresh connection.
func upload(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	size := p.Size
	spec.Paths, spec.Upload = []string{"/upload"}, size
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	connectMetrics(fr, res)
	delete(res.Metrics, "ttfb_ms")
	r := fr.Requests[0]
	if r.UploadBytes != size {
		return res, fmt.Errorf("sent %d bytes, want %d", r.UploadBytes, size)
	}
	transferMetrics(res, fr, r, r.Start, size)
	if r.ServerUploadNanos > 0 {
		res.Metrics["server_receive_ms"] = Ms(r.ServerUploadNanos)
	}
	return res, nil
}
