// Package lighthouse is the Lighthouse stack (stack.yaml beside this
// file): Lighthouse auditing page loads in headless Chromium (the CLI run
// by package lighthouse with the Node.js and the Lighthouse this folder
// pins). It registers the client agent's lighthouse client and doctor's
// check.
package lighthouse

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sync"
	"time"

	"github.com/quicbench/quicbench/browser"
	lh "github.com/quicbench/quicbench/lighthouse"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

// Chromium switches of a Lighthouse sample, beyond the browser package's
// own. Found by experiment with Lighthouse 12.8.2 and Chromium 156
// (docs/metrics.md, "Lighthouse"): with RenderDocument on, Time to
// Interactive collapsed to First Contentful Paint in 7 of 10 loads.
var (
	lighthouseDisabledFeatures = []string{"RenderDocument"}
	lighthouseChromiumArgs     = []string{"--disable-ipc-flooding-protection", "--disable-prompt-on-repost"}
)

// lighthouseAfterLoad is what a Lighthouse run needs after the page's load
// within the sample's timeout: at least 5.25 s of network and CPU quiet,
// then the trace's processing and the audits.
const lighthouseAfterLoad = 30 * time.Second

// Name is the stack's name in the registry.
const Name = "lighthouse"

// minTimeout is the stack's min_timeout (stack.yaml): a sample's shortest
// timeout, which the plan's check enforces.
var minTimeout = func() time.Duration {
	st, ok := peers.ClientStack(Name)
	if !ok {
		panic("lighthouse: not in the registry")
	}
	return time.Duration(st.Client.MinTimeout)
}()

// lighthouseMinLoad is the shortest wait for the page's load a sample gives
// Lighthouse: what minTimeout leaves after lighthouseAfterLoad and the 1 s
// it allows for the browser's start.
var lighthouseMinLoad = minTimeout - lighthouseAfterLoad - time.Second

func init() {
	peers.Provide(Name, peers.Hooks{Check: check})
	workload.RegisterClient(Name, func(workload.ClientEnv) workload.ClientImpl {
		return workload.ClientImpl{Load: lighthouseLoader(), Version: version}
	})
}

// check finds Node.js and the pinned Lighthouse.
func check(context.Context, string) (v, detail string, err error) {
	inst, err := lh.Find()
	if err != nil {
		return "", "", err
	}
	return "Lighthouse " + inst.Version, fmt.Sprintf("%s on Node %s (%s)", inst.CLI, inst.NodeVersion, inst.Node), nil
}

// version is what the run records of a lighthouse client's samples: its
// Chromium's product, Lighthouse's version and Node's.
func version(ctx context.Context) (string, error) {
	inst, err := lh.Find()
	if err != nil {
		return "", err
	}
	v, err := chromiumVersion(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s; Lighthouse %s on Node %s", v, inst.Version, inst.NodeVersion), nil
}

// chromiumVersion starts the Chromium Lighthouse drives, once, and
// returns its product.
func chromiumVersion(ctx context.Context) (string, error) {
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

// lighthouseLoader returns the agent's Lighthouse sampler. Every sample
// starts Chromium with a fresh profile (as a chromium sample does, plus a
// DevTools port on the namespace's loopback and the switches above), runs
// the Lighthouse CLI against it (node, inside the client namespace like
// the agent), and closes the browser. Prep is the browser's start; Wall is
// Lighthouse's whole run (its own tab, the load, the quiet windows, the
// audits). Lighthouse is looked for once, at the first sample.
func lighthouseLoader() workload.BrowserLoader {
	return newLighthouseLoader(lh.Find)
}

// newLighthouseLoader is lighthouseLoader with the function that finds
// Lighthouse, which it calls at most once.
func newLighthouseLoader(find func() (lh.Install, error)) workload.BrowserLoader {
	find = sync.OnceValues(find)
	return func(ctx context.Context, req workload.Request, pageURL string) (*workload.Result, error) {
		inst, err := find()
		if err != nil {
			return nil, err
		}
		limit := req.Timeout
		if limit <= 0 {
			limit = lh.DefaultTimeout
		}
		opts := browser.Options{
			URL:             pageURL,
			Protocol:        req.Protocol,
			SPKIHash:        req.Target.SPKI,
			RemoteDebugging: true,
			DisableFeatures: lighthouseDisabledFeatures,
			ExtraArgs:       lighthouseChromiumArgs,
			KeyLogFile:      req.KeyLog,
		}
		before, _ := workload.ChildrenCPU()
		start := time.Now()
		s, err := browser.NewSession(ctx, opts)
		res := &workload.Result{Metrics: map[string]float64{}, Prep: time.Since(start)}
		if err != nil {
			return res, err
		}
		rep, wall, err := audit(ctx, s, inst, pageURL, limit, res.Prep)
		if cerr := s.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
		after, _ := workload.ChildrenCPU()
		if rep == nil {
			return res, err
		}
		fillLighthouse(res, rep, pageURL)
		res.Wall = wall
		res.CPU = model.CPUUsage{ClientUser: after.User - before.User, ClientSys: after.Sys - before.Sys}
		if err != nil {
			return res, err
		}
		var inc *lh.IncompleteError
		if err := rep.Check(); errors.As(err, &inc) && inc.Err == nil {
			return res, &workload.InvalidError{Reason: err.Error()}
		} else if err != nil {
			return res, err
		}
		if err := protocolCheck(rep, req.Protocol, pageURL); err != nil {
			return res, &workload.InvalidError{Reason: err.Error()}
		}
		return res, nil
	}
}

// audit runs Lighthouse against the session's browser within what the
// sample's timeout leaves after the browser's start (prep) and returns the
// report (also with a runtime error), the run's duration and its error.
func audit(ctx context.Context, s *browser.Session, inst lh.Install, pageURL string, timeout, prep time.Duration) (*lh.Report, time.Duration, error) {
	wait, err := lighthouseWait(timeout, prep)
	if err != nil {
		return nil, 0, err
	}
	port, err := s.DevToolsPort()
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	rep, err := lh.Run(ctx, inst, lh.Options{URL: pageURL, Port: port, MaxWaitForLoad: wait, Timeout: timeout - prep})
	return rep, time.Since(start), err
}

// lighthouseWait returns Lighthouse's MaxWaitForLoad for a sample whose
// timeout is timeout and whose browser took prep to start: Lighthouse
// stops waiting for the load then and still needs lighthouseAfterLoad for
// its quiet windows and audits. It fails when that leaves less than
// lighthouseMinLoad for the load (the plan's check lets no timeout under
// minTimeout through, but the browser can start slowly).
func lighthouseWait(timeout, prep time.Duration) (time.Duration, error) {
	wait := timeout - prep - lighthouseAfterLoad
	if wait < lighthouseMinLoad {
		need := max(minTimeout, (prep + lighthouseAfterLoad + lighthouseMinLoad + time.Second - 1).Truncate(time.Second))
		return 0, fmt.Errorf("client lighthouse: the sample's timeout of %v, less the browser's start (%v) and the %v Lighthouse needs after the load, leaves %v for the page's load, less than the %v minimum: give the test a timeout of at least %v",
			timeout, prep.Round(time.Millisecond), lighthouseAfterLoad, wait.Round(time.Millisecond), lighthouseMinLoad, need)
	}
	return wait, nil
}

// fillLighthouse turns a Lighthouse report into the sample's metrics
// (docs/metrics.md, "Lighthouse"), its resources and its negotiated
// protocol.
func fillLighthouse(res *workload.Result, rep *lh.Report, pageURL string) {
	m := res.Metrics
	for id, name := range map[string]string{
		lh.AuditFCP: "lh_fcp_ms", lh.AuditSI: "lh_si_ms", lh.AuditLCP: "lh_lcp_ms",
		lh.AuditTTI: "lh_tti_ms", lh.AuditTBT: "lh_tbt_ms", lh.AuditCLS: "lh_cls",
	} {
		if v, ok := rep.MetricValues[id]; ok {
			m[name] = v
		}
	}
	// Both scores need every metric's score (Lighthouse 12 gives none
	// when a weighted metric is missing; Check then marks the sample).
	if len(rep.MetricScores) == len(lh.MetricAudits()) {
		// Lighthouse gives the score with two decimals: whole points.
		m["lh_score"] = math.Round(100 * rep.Score)
		m["lh_study_score"] = 100 * rep.StudyScore
	}
	if rep.BenchmarkIndex > 0 {
		m["lh_benchmark_index"] = rep.BenchmarkIndex
	}
	if rep.ObservedLoad > 0 {
		m["plt_ms"] = rep.ObservedLoad
	}
	if rep.ObservedDOMContentLoaded > 0 {
		m["dcl_ms"] = rep.ObservedDOMContentLoaded
	}
	if len(rep.Requests) > 0 {
		m["resources"] = float64(len(rep.Requests))
		m["transfer_bytes"] = float64(rep.TotalByteWeight)
	}
	res.Bytes = rep.TotalByteWeight
	base, _ := url.Parse(pageURL)
	// The requests come in Lighthouse's record order, not sorted by
	// start: the earliest start is the zero point.
	var t0 float64
	for i, r := range rep.Requests {
		if i == 0 || r.StartMs < t0 {
			t0 = r.StartMs
		}
	}
	ns := func(ms float64) int64 { return int64(math.Round((ms - t0) * 1e6)) }
	for _, r := range rep.Requests {
		name := r.URL
		if u, err := url.Parse(r.URL); err == nil && base != nil && u.Host == base.Host && u.Scheme == base.Scheme {
			name = u.EscapedPath()
			if u.RawQuery != "" {
				name += "?" + u.RawQuery
			}
		}
		end := r.EndMs
		if !r.Finished || end < r.StartMs {
			end = r.StartMs
		}
		// The network-requests audit gives no response start: TTFB is left
		// at the request's end.
		res.Resources = append(res.Resources, model.Resource{Name: name, Protocol: r.Protocol,
			Start: ns(r.StartMs), TTFB: ns(end), End: ns(end), Bytes: r.TransferSize})
	}
	if len(rep.Requests) > 0 {
		// The document's connection, as far as Lighthouse tells it.
		p := rep.Requests[0].Protocol
		res.Negotiated = model.Negotiated{ALPN: p, HTTPVersion: browser.HTTPVersion(p)}
	}
}

// protocolCheck returns a *browser.ProtocolMismatchError when a request
// to the page's origin used another protocol than proto (requests to
// other origins and data: URLs are not checked).
func protocolCheck(rep *lh.Report, proto, pageURL string) error {
	want, _ := browser.NextHopProtocol(proto)
	base, err := url.Parse(pageURL)
	if err != nil {
		return err
	}
	total := 0
	var bad []browser.Mismatch
	for _, r := range rep.Requests {
		u, err := url.Parse(r.URL)
		if err != nil || u.Scheme != base.Scheme || u.Host != base.Host {
			continue
		}
		total++
		if r.Protocol != want {
			bad = append(bad, browser.Mismatch{Name: u.EscapedPath(), Got: r.Protocol})
		}
	}
	if total == 0 {
		return fmt.Errorf("no request to %s://%s in Lighthouse's network-requests audit", base.Scheme, base.Host)
	}
	if len(bad) > 0 {
		return &browser.ProtocolMismatchError{Want: want, Total: total, Mismatches: bad}
	}
	return nil
}
