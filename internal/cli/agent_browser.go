package cli

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/internal/model"
	"github.com/quicbench/quicbench/workload"
)

// browserLoader returns the agent's Chromium page loader: one cold load per
// sample (fresh profile, no cache, no connection carried over).
func browserLoader() workload.BrowserLoader {
	return func(ctx context.Context, req workload.Request, url string) (*workload.Result, error) {
		opts := browser.Options{
			URL:          url,
			Protocol:     req.Protocol,
			SPKIHash:     req.Target.SPKI,
			Timeout:      req.Timeout,
			DisableCache: true,
		}
		before := childrenCPU()
		br, err := browser.Load(ctx, opts)
		after := childrenCPU()
		res := &workload.Result{Metrics: map[string]float64{}}
		if br != nil {
			for k, v := range br.Metrics() {
				res.Metrics[k] = v
			}
			// page load time: the load event's end, from navigation start
			res.Metrics["plt_ms"] = float64(br.Load) / 1e6
			res.Resources = br.Resources
			res.Negotiated = br.Negotiated
			res.Bytes = br.TransferBytes
			res.Wall = br.Wall
			res.CPU = model.CPUUsage{ClientUser: after.user - before.user, ClientSys: after.sys - before.sys}
		}
		var mm *browser.ProtocolMismatchError
		if errors.As(err, &mm) {
			return res, &workload.InvalidError{Reason: mm.Error()}
		}
		return res, err
	}
}

type cpuPair struct{ user, sys time.Duration }

// childrenCPU is the CPU time of the agent's waited-for children: the
// browser processes of finished samples.
func childrenCPU() cpuPair {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return cpuPair{}
	}
	return cpuPair{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}
