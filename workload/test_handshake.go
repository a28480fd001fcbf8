package workload

import (
	"context"
	"fmt"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestHandshake, run{builtin: handshake}) }

// handshake opens a connection in p.Mode (fresh, resumed or with 0-RTT
// data) and checks that the server did what the mode asks.
func handshake(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	mode := p.Mode
	spec.Paths = []string{"/echo"}
	switch mode {
	case plan.ModeFull:
	case plan.ModeResumed:
		spec.Resume = true
	case plan.ModeZeroRTT:
		spec.ZeroRTT = true
	default:
		return nil, fmt.Errorf("handshake mode %q: want full, resumed or 0rtt", mode)
	}
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	connectMetrics(fr, res)
	if mode == plan.ModeZeroRTT {
		// With 0-RTT the request leaves before the handshake completes: the
		// time until the connection can carry data is the connect time.
		res.Metrics["handshake_ms"] = res.Metrics["connect_ms"]
	}
	switch {
	case mode != plan.ModeFull && !res.Negotiated.Resumed:
		return res, &InvalidError{Reason: "the server did not resume the TLS session"}
	case mode == plan.ModeZeroRTT && !res.Negotiated.ZeroRTT:
		return res, &InvalidError{Reason: "the server did not accept 0-RTT"}
	case mode == plan.ModeFull && res.Negotiated.Resumed:
		return res, &InvalidError{Reason: "a fresh connection resumed a session"}
	}
	return res, nil
}
