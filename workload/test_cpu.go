package workload

import (
	"context"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

func init() { define(plan.TestCPU, run{builtin: cpu}) }

// cpu is a download of p.Size bytes that samples the client's CPU
// utilisation meanwhile.
func cpu(ctx context.Context, e *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	now := e.Now
	if now == nil {
		now = time.Now
	}
	stop := make(chan struct{})
	samples := make(chan []model.Point, 1)
	t0 := now()
	go func() { samples <- sampleCPU(stop, t0, now) }()
	res, err := download(ctx, e, spec, p)
	close(stop)
	pts := <-samples
	if res != nil {
		res.Timelines = append(res.Timelines, model.Series{Kind: model.SeriesCPUClient, Label: "client", Points: pts})
	}
	return res, err
}

// sampleCPU records the client process's CPU utilisation (1.0 = one core)
// every CPUSampleInterval until stop is closed.
func sampleCPU(stop <-chan struct{}, t0 time.Time, now func() time.Time) []model.Point {
	var pts []model.Point
	prev, err := endpoint.ProcessCPU()
	if err != nil {
		return nil
	}
	prevT := now()
	tick := time.NewTicker(CPUSampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return pts
		case <-tick.C:
		}
		cur, err := endpoint.ProcessCPU()
		if err != nil {
			return pts
		}
		t := now()
		d := cur.Sub(prev)
		if dt := t.Sub(prevT); dt > 0 {
			pts = append(pts, model.Point{T: int64(prevT.Sub(t0)), V: float64(d.User+d.Sys) / float64(dt)})
		}
		prev, prevT = cur, t
	}
}
