package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/plan"
)

// PageSession is where a sample's loads run: a fresh isolated context of a
// kept browser, or a fresh browser (a *browser.Session, a
// *firefox.Session, or their contexts).
type PageSession interface {
	Load(ctx context.Context, url string) (*browser.Result, error)
	Bench(ctx context.Context, url, expr string) ([]byte, error)
}

// PageContext is a sample's isolated context in a kept browser (a
// *browser.Context, a *firefox.UserContext): the sample closes it, and
// every connection, cache entry and TLS session of it goes with it.
type PageContext interface {
	PageSession
	Close() error
}

// KeptBrowser is a browser a client agent keeps across samples: a pool
// member (browser.PooledBrowser) that also takes a sample itself when it
// was started for that sample alone (browser_restart: always).
type KeptBrowser interface {
	browser.PooledBrowser
	PageSession
}

// KeptBrowsers are a browser client's running browsers in the client
// agent, kept across its samples (a browser.Pool): one per launch key (for
// Chromium, the protocol switches, which are process-wide; Firefox sets
// its protocol preferences in the running browser, so one serves every
// protocol). Every sample gets a fresh isolated context in its browser,
// closed after it. A sample gets a fresh browser instead, as before
// browsers were kept, with the plan's browser_restart: always, and when
// it has a key log (Request.KeyLog: the file a browser writes its TLS
// secrets to is set when it starts). A browser that ended, hangs or holds
// more than the memory limit is replaced before a sample, and the sample
// says so (a warning); one that ends or hangs during a sample is closed
// and that sample fails with a warning.
type KeptBrowsers[B KeptBrowser] struct {
	pool  *browser.Pool[B]
	s     KeptSpec[B]
	stale sync.Once // removes stale profiles before the first sample
}

// KeptSpec is how a browser client's samples use its kept browsers.
type KeptSpec[B KeptBrowser] struct {
	// Key is the launch key of the browser of req's sample at url
	// (browser.Options.LaunchKey): samples with equal keys share a
	// browser.
	Key func(req Request, url string) (string, error)
	// Start starts the browser of req's sample at url, its start bounded
	// by startTimeout (0: the driver's default).
	Start func(ctx context.Context, req Request, url string, startTimeout time.Duration) (B, error)
	// NewContext makes req's fresh isolated context in b.
	NewContext func(ctx context.Context, b B, req Request, url string) (PageContext, error)
	// Pool configures the pool (the zero value: its defaults).
	Pool browser.PoolOptions
	// ProfilePrefix starts the names of the browser's profile
	// directories (in the temporary directory): before its first sample,
	// the stale ones are removed (browser.RemoveStaleProfiles), those of
	// browsers killed with an earlier agent (a runner kills a hung agent,
	// and nothing else removes them). "" removes none.
	ProfilePrefix string
}

// StaleProfileAge is how old a browser profile that no process uses must
// be before a client agent removes it as left behind: a profile being
// made, before its browser starts, is younger.
const StaleProfileAge = 10 * time.Minute

// NewKeptBrowsers returns a browser client's kept browsers, none running
// yet.
func NewKeptBrowsers[B KeptBrowser](s KeptSpec[B]) *KeptBrowsers[B] {
	return &KeptBrowsers[B]{pool: browser.NewPool[B](s.Pool), s: s}
}

// Close ends every kept browser and removes its profile.
func (k *KeptBrowsers[B]) Close() error { return k.pool.Close() }

// Len is the number of browsers kept now.
func (k *KeptBrowsers[B]) Len() int { return k.pool.Len() }

// StartTimeout bounds the start of req's browser: BrowserStartTimeout for
// a kept browser, 0 (the driver's default) for a browser per sample.
func StartTimeout(req Request) time.Duration {
	if freshBrowser(req) {
		return 0
	}
	return BrowserStartTimeout
}

// freshBrowser reports whether req's sample gets a browser of its own.
func freshBrowser(req Request) bool {
	return req.BrowserRestart == browser.RestartAlways || req.KeyLog != "" || req.HARFile != ""
}

// browserRun is what one sample did with its browser.
type browserRun struct {
	rep browser.SampleReport
	// prep is the time from the sample's start until its page was ready:
	// the browser's start (when the sample started one), the context's
	// creation (all of it until a failure, when one failed).
	prep time.Duration
}

// run runs f in a page of req's browser: a fresh context of the kept
// browser of its key (started when there is none), or a fresh browser
// (freshBrowser). The error is f's, or the browser's start's or the
// context's creation's; a context that could not be closed makes the pool
// close its browser and warn, but does not fail a sample that measured.
func (k *KeptBrowsers[B]) run(ctx context.Context, req Request, url string, f func(context.Context, PageSession) error) (browserRun, error) {
	var run browserRun
	k.stale.Do(func() {
		if k.s.ProfilePrefix != "" {
			_, _ = browser.RemoveStaleProfiles(os.TempDir(), StaleProfileAge, k.s.ProfilePrefix)
		}
	})
	key, err := k.s.Key(req, url)
	if err != nil {
		return run, err
	}
	restart := req.BrowserRestart
	if freshBrowser(req) {
		restart = browser.RestartAlways
	}
	t0 := time.Now()
	var measureErr error
	ran := false
	rep, err := k.pool.Run(ctx, browser.SampleSpec[B]{
		Key: key, Restart: restart, MemoryLimit: req.BrowserMemoryLimit, FileLimit: req.BrowserFileLimit,
		Start: func(ctx context.Context) (B, error) { return k.s.Start(ctx, req, url, StartTimeout(req)) },
		Run: func(ctx context.Context, b B, fresh bool) error {
			ran = true
			if fresh {
				run.prep = time.Since(t0)
				measureErr = f(ctx, b)
				return measureErr
			}
			p, err := k.s.NewContext(ctx, b, req, url)
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
	if !ran || restart == browser.RestartAlways || measureErr != nil {
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
func (r browserRun) report() *BrowserReport {
	rep := &BrowserReport{Warnings: r.rep.Warnings(), Metrics: map[string]float64{}}
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

// Bench is the client's bench page driver (a BrowserBench): in the
// sample's fresh context (or browser) it loads the page, reads its result
// and closes the context.
func (k *KeptBrowsers[B]) Bench() BrowserBench {
	return func(ctx context.Context, req Request, url string) ([]byte, *BrowserReport, error) {
		var out []byte
		run, err := k.run(ctx, req, url, func(ctx context.Context, p PageSession) error {
			var err error
			out, err = p.Bench(ctx, url, BenchResultJS)
			return err
		})
		return out, run.report(), err
	}
}

// Loader is the client's page loader: every sample in its fresh context
// (or browser), with the HTTP cache disabled (as the client's NewContext
// and Start set it up). connection cold (the default): one load, nothing
// carried over. connection warm: an unmeasured priming load of the same
// URL, then the measured load in the same context, over the connections
// the priming load left open; both loads together within the sample's
// timeout. The result's Prep is the time from the sample's start until
// the measured load (the browser's start if any, the context's creation,
// and the priming load when warm); its CPU the browser processes' on the
// sample (browser.SampleReport).
func (k *KeptBrowsers[B]) Loader() BrowserLoader {
	return func(ctx context.Context, req Request, url string) (*Result, error) {
		warm := req.Params.Connection == plan.ConnWarm
		var br, primer *browser.Result
		var priming time.Duration
		var harErr error
		run, err := k.run(ctx, req, url, func(ctx context.Context, p PageSession) error {
			var err error
			p, writeHAR := recordHAR(req, p)
			if warm {
				primer, br, priming, err = warmLoad(ctx, p, url, req.Timeout)
			} else {
				br, err = p.Load(ctx, url)
			}
			harErr = writeHAR()
			return err
		})
		rep := run.report()
		res := &Result{Metrics: rep.Metrics, Prep: run.prep + priming, Warnings: rep.Warnings}
		if harErr != nil {
			res.Warnings = append(res.Warnings, harErr.Error())
		}
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
			return res, &InvalidError{Reason: reason}
		}
		if err == nil && warm && !br.ConnectionReused {
			return res, &InvalidError{Reason: "connection warm: the measured load's document came over a new connection, not one the priming load had opened"}
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
func warmLoad(ctx context.Context, p PageSession, url string, limit time.Duration) (primer, measured *browser.Result, priming time.Duration, err error) {
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
