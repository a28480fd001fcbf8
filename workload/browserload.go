package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// PageSession is a running browser of one sample (a *browser.Session, a
// *firefox.Session): it loads pages and closes.
type PageSession interface {
	Load(ctx context.Context, url string) (*browser.Result, error)
	Close() error
}

// StartSession starts the browser of one sample, for the page url.
type StartSession func(ctx context.Context, req Request, url string) (PageSession, error)

// SessionLoader is the page loader of a browser client whose browsers
// start takes. Every sample starts a browser (with a fresh profile and the
// HTTP cache disabled, as start sets it up). connection cold (the
// default): one load, nothing carried over. connection warm: an unmeasured
// priming load of the same URL, then the measured load in the same
// browser, over the connections the priming load left open; both loads
// together within the sample's timeout. The result's Prep is the time from
// the browser's start until the measured load (the start, and the priming
// load when warm); its CPU the browser processes' (the agent is their
// subreaper, so their CPU counts in its RUSAGE_CHILDREN once reaped).
func SessionLoader(start StartSession) BrowserLoader {
	return func(ctx context.Context, req Request, url string) (*Result, error) {
		newSession := func(ctx context.Context) (PageSession, error) { return start(ctx, req, url) }
		warm := req.Params.Connection == plan.ConnWarm
		before, _ := ChildrenCPU()
		var br, primer *browser.Result
		var prep time.Duration
		var err error
		if warm {
			primer, br, prep, err = warmLoad(ctx, newSession, url, req.Timeout)
		} else {
			br, prep, err = coldLoad(ctx, newSession, url)
		}
		after, _ := ChildrenCPU()
		res := &Result{Metrics: map[string]float64{}, Prep: prep}
		cpu := model.CPUUsage{ClientUser: after.User - before.User, ClientSys: after.Sys - before.Sys}
		switch {
		case br != nil:
			for k, v := range br.Metrics() {
				res.Metrics[k] = v
			}
			// page load time: the load event's end, from navigation start
			// (absent, and the sample invalid, when it never ended)
			if br.Load > 0 {
				res.Metrics["plt_ms"] = float64(br.Load) / 1e6
			}
			res.Metrics["connection_reused"] = 0
			if br.ConnectionReused {
				res.Metrics["connection_reused"] = 1
			}
			res.Resources = br.Resources
			res.Negotiated = br.Negotiated
			res.Bytes = br.TransferBytes
			res.Wall = br.Wall
			res.CPU = cpu
			if primer != nil {
				// The CPU times cover both loads: so do the bytes they are
				// divided by (cpu_*_s_per_mb).
				res.Bytes += primer.TransferBytes
			}
		case primer != nil:
			// The priming load failed its protocol check: keep its
			// resources (which protocol each used) but no measurements.
			res.Resources = primer.Resources
			res.Negotiated = primer.Negotiated
		}
		if bad := browser.InvalidLoad(err); bad != nil {
			reason := bad.Error()
			if br == nil && primer != nil {
				reason = "priming load: " + reason
			}
			return res, &InvalidError{Reason: reason}
		}
		if err == nil && warm && !br.ConnectionReused {
			return res, &InvalidError{Reason: "connection warm: the measured load's document came over a new connection, not one the priming load had opened"}
		}
		return res, err
	}
}

// coldLoad starts a browser with a fresh profile, loads url once and
// closes the browser on every path, and also returns the time the browser
// took to start: the unmeasured preparation of the sample (all the time
// until the start failed, if it did).
func coldLoad(ctx context.Context, newSession func(context.Context) (PageSession, error), url string) (res *browser.Result, prep time.Duration, err error) {
	start := time.Now()
	s, err := newSession(ctx)
	prep = time.Since(start)
	if err != nil {
		return nil, prep, err
	}
	res, err = s.Load(ctx, url)
	if cerr := s.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return res, prep, err
}

// warmLoad starts a browser with a fresh profile, loads url once
// (priming: connections, TLS sessions, QUIC), then again in the same
// browser, and closes the browser. The second load is the measurement. Both
// loads together must finish within limit (browser.DefaultTimeout when
// zero); the browser start is bounded separately, as for a cold load.
// A priming load that fails (a protocol mismatch included) ends the sample
// with primer set and measured nil. prep is the time from the browser's
// start to the measured load (until the failure, if the start or the
// priming load failed).
func warmLoad(ctx context.Context, newSession func(context.Context) (PageSession, error), url string, limit time.Duration) (primer, measured *browser.Result, prep time.Duration, err error) {
	start := time.Now()
	s, err := newSession(ctx)
	if err != nil {
		return nil, nil, time.Since(start), err
	}
	defer func() {
		if cerr := s.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	if limit <= 0 {
		limit = browser.DefaultTimeout
	}
	lctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	loadErr := func(which string, err error) error {
		if ctx.Err() == nil && errors.Is(lctx.Err(), context.DeadlineExceeded) {
			err = &browser.TimeoutError{Phase: "load", URL: url, After: limit}
			return fmt.Errorf("connection warm: the priming and the measured load together: %w", err)
		}
		return fmt.Errorf("connection warm: %s load: %w", which, err)
	}
	primer, err = s.Load(lctx, url)
	prep = time.Since(start)
	if err != nil {
		return primer, nil, prep, loadErr("priming", err)
	}
	measured, err = s.Load(lctx, url)
	if err != nil {
		return primer, measured, prep, loadErr("measured", err)
	}
	return primer, measured, prep, nil
}
