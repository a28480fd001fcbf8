package workload

import (
	"context"
	"errors"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestTTFB, run{builtin: ttfb}) }

// ttfb fetches p.Size bytes on a fresh connection for its first byte.
func ttfb(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	_, res, _, err := fetchBytes(ctx, spec, p.Size)
	if err != nil {
		return res, err
	}
	if _, ok := res.Metrics["ttfb_ms"]; !ok {
		return res, errors.New("no first byte recorded")
	}
	return res, nil
}
