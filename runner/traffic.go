package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/quicbench/quicbench/competing"
	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/traffic"
	"github.com/quicbench/quicbench/workload"
)

// callWithTraffic takes the measured part of a sample of cell c: the
// fairness test's flows (fairnessSample), or the agent's request with the
// cell's competing flows running around it (they start the spec's lead
// time before the request and stop after it). Metrics it adds:
// competing_goodput_mbps (the competing flows' goodput over the agent's
// call), competing_flows and machine_cpu_busy; each competing flow's
// throughput timeline over the call (T from its start).
func (r *slot) callWithTraffic(ctx context.Context, c *model.Cell, req workload.Request, seed uint64) (*workload.Result, []model.Series, error) {
	sp, err := plan.Competing(c)
	if err != nil {
		return trafficFailed(err), nil, nil
	}
	if c.Test == plan.TestFairness {
		return r.fairnessSample(ctx, c, req, sp, seed)
	}
	if len(sp.Flows) == 0 {
		return r.callAgent(ctx, req)
	}
	cpu0, cpuErr0 := sysinfo.ReadCPUTimes()
	sess, err := traffic.Start(ctx, r.tb, sp.Flows, traffic.Options{Seed: seed})
	if err != nil {
		return trafficFailed(err), nil, nil
	}
	defer sess.Stop()
	r.noteCompeting(sess.Ports())
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(sp.Lead):
	}
	b0, t0 := sess.Bytes(), time.Now()
	res, series, err := r.callAgent(ctx, req)
	b1, t1 := sess.Bytes(), time.Now()
	flows := sess.Stop()
	if err != nil {
		return res, series, err
	}
	var moved int64
	from := t0.Sub(sess.Started())
	for i, f := range flows {
		moved += b1[i] - b0[i]
		series = append(series, competing.Series(f, sess.Bin(), from, t1.Sub(sess.Started())))
		if f.Err != "" && res.Status == model.StatusOK {
			res.Status, res.Error = model.StatusFailed, fmt.Sprintf("competing flow %s failed: %s", f.Label, f.Err)
		}
	}
	if res.Metrics == nil {
		res.Metrics = map[string]float64{}
	}
	res.Metrics["competing_flows"] = float64(len(flows))
	if secs := t1.Sub(t0).Seconds(); secs > 0 {
		res.Metrics["competing_goodput_mbps"] = float64(moved) * 8 / secs / 1e6
	}
	busy(res.Metrics, cpu0, cpuErr0)
	return res, series, nil
}

// fairnessSample runs the fairness test: the cell's flow (TCP with the
// cell's congestion control, or QUIC) and the competing flows start
// together and run for the test's duration.
func (r *slot) fairnessSample(ctx context.Context, c *model.Cell, req workload.Request, sp competing.Spec, seed uint64) (*workload.Result, []model.Series, error) {
	measured := competing.Flow{Kind: competing.KindTCP, CC: c.CC, Count: 1}
	if model.IsQUIC(c.Protocol) {
		measured = competing.Flow{Kind: competing.KindQUIC, Count: 1}
	}
	cpu0, cpuErr0 := sysinfo.ReadCPUTimes()
	sess, err := traffic.Start(ctx, r.tb, append([]competing.Flow{measured}, sp.Flows...), traffic.Options{Seed: seed})
	if err != nil {
		return trafficFailed(err), nil, nil
	}
	defer sess.Stop()
	r.noteCompeting(sess.Ports()[1:]) // the first flow is the measured one
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(req.Params.Duration):
	}
	flows := sess.Stop()
	flows[0].Label = c.Protocol + " (measured)"
	res := &workload.Result{Status: model.StatusOK, Metrics: map[string]float64{}, Wall: req.Params.Duration}
	for _, f := range flows {
		if f.Err != "" && res.Status == model.StatusOK {
			res.Status, res.Error = model.StatusFailed, fmt.Sprintf("flow %s failed: %s", f.Label, f.Err)
		}
	}
	sum := competing.Summarize(flows, sess.Bin())
	m := res.Metrics
	m["jain_index"] = sum.Jain
	m["flows"] = float64(len(flows))
	m["share"] = sum.Flows[0].Share
	m["goodput_mbps"] = sum.Flows[0].GoodputMbs
	m["total_goodput_mbps"] = sum.TotalMbps
	m["competing_goodput_mbps"] = sum.TotalMbps - sum.Flows[0].GoodputMbs
	m["steady_start_s"] = sum.SteadyStart.Seconds()
	var series []model.Series
	for _, f := range flows {
		series = append(series, competing.Series(f, sess.Bin(), 0, 0))
	}
	busy(m, cpu0, cpuErr0)
	// Flows run in the runner's process: the endpoints' CPU is not theirs.
	return res, series, nil
}

// busy records the machine's CPU utilisation since cpu0 (machine_cpu_busy,
// 1.0 = every core busy), the check that the flows were not CPU-bound.
func busy(m map[string]float64, cpu0 sysinfo.CPUTimes, err0 error) {
	cpu1, err1 := sysinfo.ReadCPUTimes()
	if err0 != nil || err1 != nil {
		return
	}
	if u := sysinfo.Utilisation(cpu0, cpu1); u >= 0 {
		m["machine_cpu_busy"] = u
	}
}

// trafficFailed is the result of a sample whose flows could not be started.
func trafficFailed(err error) *workload.Result {
	return &workload.Result{Status: model.StatusFailed, Error: err.Error(), Metrics: map[string]float64{}}
}

// noteCompeting records the server-side ports of the sample's competing
// flows (0 for flows without TCP connections), whose connections the
// sample's congestion control check leaves out.
func (r *slot) noteCompeting(ports []uint16) {
	for _, p := range ports {
		if p == 0 {
			continue
		}
		if r.competingPorts == nil {
			r.competingPorts = map[uint16]bool{}
		}
		r.competingPorts[p] = true
	}
}
