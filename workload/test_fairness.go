package workload

import (
	"context"
	"errors"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestFairness, run{builtin: fairness}) }

// fairness refuses: the fairness test's flows need a sender in the server
// namespace and a receiver in the client namespace, which the runner opens
// itself (package traffic), so the client agent never takes its samples.
func fairness(context.Context, *Executor, endpoint.FetchSpec, plan.Params) (*Result, error) {
	return nil, errors.New("the fairness test is run by the runner (package traffic), not by the client agent")
}
