package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// staleProfileAge is how old a browser profile that no process uses must
// be before an agent removes it as left behind.
const staleProfileAge = 10 * time.Minute

// agentBrowsers are the client agent's running browsers, kept across its
// samples (browser.Pool): a Chromium per set of protocol switches (h1, h2,
// h3: they are process-wide) and one Firefox (its protocol preferences are
// set in the running browser). Every sample gets a fresh isolated context
// in its browser (a Chromium browser context, a Firefox user context),
// closed after it; with the plan's browser_restart: always, a fresh
// browser instead, as before browsers were kept.
type agentBrowsers struct {
	chromium *browser.Pool[*browser.Session]
	firefox  *browser.Pool[*firefox.Session]
	// The options every sample's browser starts from (zero in the agent;
	// tests set a namespace and a profile directory).
	chromiumBase browser.Options
	firefoxBase  firefox.Options
}

func newAgentBrowsers() *agentBrowsers {
	// Profiles of browsers killed with an earlier agent (a runner kills a
	// hung agent) have no one else to remove them.
	_, _ = browser.RemoveStaleProfiles(os.TempDir(), staleProfileAge)
	return &agentBrowsers{
		chromium: browser.NewPool[*browser.Session](browser.PoolOptions{}),
		firefox:  browser.NewPool[*firefox.Session](browser.PoolOptions{}),
	}
}

// Close ends every kept browser, Chromium's and Firefox's at once.
func (a *agentBrowsers) Close() error {
	ff := make(chan error, 1)
	go func() { ff <- a.firefox.Close() }()
	return errors.Join(a.chromium.Close(), <-ff)
}

// page is where a sample's loads run: a fresh context of a kept browser,
// or a fresh browser.
type page interface {
	Load(ctx context.Context, url string) (*browser.Result, error)
	Bench(ctx context.Context, url, expr string) ([]byte, error)
}

// pageCloser is a page the sample closes itself (a context).
type pageCloser interface {
	page
	Close() error
}

// chromiumOptions are the options of a Chromium sample of req at url.
func (a *agentBrowsers) chromiumOptions(req workload.Request, url string) browser.Options {
	o := a.chromiumBase
	o.URL, o.Protocol, o.SPKIHash, o.Timeout, o.DisableCache = url, req.Protocol, req.Target.SPKI, req.Timeout, true
	o.StartTimeout = startTimeout(req)
	return o
}

// startTimeout bounds the start of req's browser: workload.BrowserStartTimeout
// for a kept browser, the browser package's default for a browser per
// sample (browser_restart: always), as before browsers were kept.
func startTimeout(req workload.Request) time.Duration {
	if req.BrowserRestart == browser.RestartAlways {
		return 0
	}
	return workload.BrowserStartTimeout
}

// firefoxOptions are the options of a Firefox sample of req at url.
func (a *agentBrowsers) firefoxOptions(req workload.Request, url string) firefox.Options {
	o := a.firefoxBase
	o.URL, o.Protocol, o.CAPEM, o.Timeout, o.DisableCache = url, req.Protocol, []byte(req.Target.CAPEM), req.Timeout, true
	o.StartTimeout = startTimeout(req)
	return o
}

// inChromium runs f in a page of the Chromium of req's sample at url.
func (a *agentBrowsers) inChromium(ctx context.Context, req workload.Request, url string, f func(context.Context, page) error) (browserRun, error) {
	o := a.chromiumOptions(req, url)
	key, err := o.LaunchKey()
	if err != nil {
		return browserRun{}, err
	}
	return inBrowser(ctx, a.chromium, req, key,
		func(ctx context.Context) (*browser.Session, error) { return browser.NewSession(ctx, o) },
		func(ctx context.Context, s *browser.Session) (pageCloser, error) { return s.NewContext(ctx, o) }, f)
}

// inFirefox runs f in a page of the Firefox of req's sample at url.
func (a *agentBrowsers) inFirefox(ctx context.Context, req workload.Request, url string, f func(context.Context, page) error) (browserRun, error) {
	o := a.firefoxOptions(req, url)
	key, err := o.LaunchKey()
	if err != nil {
		return browserRun{}, err
	}
	return inBrowser(ctx, a.firefox, req, key,
		func(ctx context.Context) (*firefox.Session, error) { return firefox.NewSession(ctx, o) },
		func(ctx context.Context, s *firefox.Session) (pageCloser, error) { return s.NewContext(ctx, o) }, f)
}

// browserRun is what one sample did with its browser.
type browserRun struct {
	rep browser.SampleReport
	// prep is the time from the sample's start until its page was ready:
	// the browser's start (when the sample started one), the context's
	// creation (all of it until a failure, when one failed).
	prep time.Duration
}

// inBrowser runs f in a page of pool's browser for req: a fresh context of
// the kept browser of key (started by start when there is none), or with
// browser_restart: always a fresh browser. The error is f's, or the
// browser's start's or the context's creation's; a context that could not
// be closed makes the pool close its browser and warn, but does not fail
// a sample that measured.
func inBrowser[B interface {
	browser.PooledBrowser
	page
}](ctx context.Context, pool *browser.Pool[B], req workload.Request, key string,
	start func(context.Context) (B, error), newPage func(context.Context, B) (pageCloser, error),
	f func(context.Context, page) error) (browserRun, error) {
	t0 := time.Now()
	var run browserRun
	var measureErr error
	ran := false
	rep, err := pool.Run(ctx, browser.SampleSpec[B]{
		Key: key, Restart: req.BrowserRestart, MemoryLimit: req.BrowserMemoryLimit, Start: start,
		Run: func(ctx context.Context, b B, fresh bool) error {
			ran = true
			if fresh {
				run.prep = time.Since(t0)
				measureErr = f(ctx, b)
				return measureErr
			}
			p, err := newPage(ctx, b)
			run.prep = time.Since(t0)
			if err != nil {
				measureErr = err
				return err
			}
			measureErr = f(ctx, p)
			return errors.Join(measureErr, p.Close())
		},
	})
	run.rep = rep
	if run.prep == 0 {
		run.prep = time.Since(t0) // the start failed
	}
	if !ran || req.BrowserRestart == browser.RestartAlways || measureErr != nil {
		// The browser did not start, or the sample failed; a fresh
		// browser's close error counts too, as it always did.
		return run, err
	}
	if err != nil && rep.Broken == "" {
		// The context's close failed but the browser answers: the
		// measurement stands; say so.
		run.rep.Broken = fmt.Sprintf("closing the sample's context failed (%v)", err)
	}
	return run, nil
}

// report is the workload view of the run: the browser's CPU on the
// sample, the warnings about its browser and the resource usage metrics.
func (r browserRun) report() *workload.BrowserReport {
	rep := &workload.BrowserReport{Warnings: r.rep.Warnings(), Metrics: map[string]float64{}}
	if r.rep.CPUErr != nil {
		rep.CPUUnavailable = true
	} else {
		rep.CPU.ClientUser, rep.CPU.ClientSys = r.rep.CPU.User, r.rep.CPU.Sys
	}
	const mb = 1 << 20
	if r.rep.Samples > 0 && r.rep.UsageErr == nil {
		rep.Metrics["browser_rss_mb"] = float64(r.rep.Usage.RSS) / mb
		rep.Metrics["browser_pss_mb"] = float64(r.rep.Usage.PSS) / mb
		rep.Metrics["browser_fds"] = float64(r.rep.Usage.FDs)
	}
	if r.rep.Samples > 0 {
		rep.Metrics["browser_age"] = float64(r.rep.Samples)
	}
	if u, err := browser.SelfUsage(); err == nil {
		rep.Metrics["agent_rss_mb"] = float64(u.RSS) / mb
		rep.Metrics["agent_fds"] = float64(u.FDs)
	}
	return rep
}

// browserLoader returns the agent's Chromium page loader: every sample in
// a fresh browser context of the agent's Chromium for its protocol (or a
// fresh browser, browser_restart: always), with the HTTP cache disabled.
// connection cold (the default): one load, nothing carried over.
// connection warm: an unmeasured priming load of the same URL, then the
// measured load in the same context, over the connections the priming
// load left open; both loads together within the sample's timeout. The
// result's Prep is the time from the sample's start until the measured
// load (the browser's start if any, the context's creation, and the
// priming load when warm).
func (a *agentBrowsers) browserLoader() workload.BrowserLoader { return pageLoader(a.inChromium) }

// pageLoader is the page loader of a browser client whose pages in runs.
func pageLoader(in func(context.Context, workload.Request, string, func(context.Context, page) error) (browserRun, error)) workload.BrowserLoader {
	return func(ctx context.Context, req workload.Request, url string) (*workload.Result, error) {
		warm := req.Params.Connection == plan.ConnWarm
		var br, primer *browser.Result
		var priming time.Duration
		run, err := in(ctx, req, url, func(ctx context.Context, p page) error {
			var err error
			if warm {
				primer, br, priming, err = warmLoad(ctx, p, url, req.Timeout)
			} else {
				br, err = p.Load(ctx, url)
			}
			return err
		})
		rep := run.report()
		res := &workload.Result{Metrics: rep.Metrics, Prep: run.prep + priming, Warnings: rep.Warnings}
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
			res.CPU = rep.CPU
			res.ClientCPUUnavailable = rep.CPUUnavailable
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
			return res, &workload.InvalidError{Reason: reason}
		}
		if err == nil && warm && !br.ConnectionReused {
			return res, &workload.InvalidError{Reason: "connection warm: the measured load's document came over a new connection, not one the priming load had opened"}
		}
		if err != nil && run.rep.Broken != "" {
			err = fmt.Errorf("%w (the browser %s)", err, run.rep.Broken)
		}
		return res, err
	}
}

// warmLoad loads url once in p (priming: connections, TLS sessions,
// QUIC), then again; the second load is the measurement. Both loads
// together must finish within limit (browser.DefaultTimeout when zero).
// A priming load that fails (a protocol mismatch included) ends the sample
// with primer set and measured nil. priming is the time the priming load
// took (until its failure, if it failed).
func warmLoad(ctx context.Context, p page, url string, limit time.Duration) (primer, measured *browser.Result, priming time.Duration, err error) {
	start := time.Now()
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
	primer, err = p.Load(lctx, url)
	priming = time.Since(start)
	if err != nil {
		return primer, nil, priming, loadErr("priming", err)
	}
	measured, err = p.Load(lctx, url)
	if err != nil {
		return primer, measured, priming, loadErr("measured", err)
	}
	return primer, measured, priming, nil
}

// browserVersion starts the Chromium the agent's browser samples use, once,
// and returns its product ("Chrome/156.0.8078.79"): the runner records it
// with the run, and a resumed run refuses another browser.
func browserVersion(ctx context.Context) (string, error) {
	s, err := browser.NewSession(ctx, browser.Options{Protocol: model.ProtoH2})
	if err != nil {
		return "", err
	}
	v := s.Version()
	if err := s.Close(); err != nil {
		return "", fmt.Errorf("closing the browser after reading its version: %w", err)
	}
	return v, nil
}

type cpuPair struct{ user, sys time.Duration }

// childrenCPU is the CPU time of the agent's waited-for children: the
// processes of browsers (and Lighthouse's node) that ended.
func childrenCPU() cpuPair {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return cpuPair{}
	}
	return cpuPair{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}
