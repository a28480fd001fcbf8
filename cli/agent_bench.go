package cli

import (
	"context"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/workload"
)

// chromiumBench returns the agent's Chromium driver of the bench page
// (workload.BrowserBench): every sample starts Chromium with a fresh
// profile and the HTTP cache disabled, forced to the sample's protocol,
// loads the page, reads its result, and closes the browser.
func chromiumBench() workload.BrowserBench {
	return func(ctx context.Context, req workload.Request, url string) ([]byte, error) {
		return browser.Bench(ctx, browser.Options{
			URL:          url,
			Protocol:     req.Protocol,
			SPKIHash:     req.Target.SPKI,
			Timeout:      req.Timeout,
			DisableCache: true,
			KeyLogFile:   req.KeyLog,
		}, workload.BenchResultJS)
	}
}

// firefoxBench returns the agent's Firefox driver of the bench page: as
// chromiumBench, in headless Firefox with a fresh profile that trusts the
// server's CA (Target.CAPEM) and, for h3, reaches the origin over HTTP/3
// from its first request.
func firefoxBench() workload.BrowserBench {
	return func(ctx context.Context, req workload.Request, url string) ([]byte, error) {
		return firefox.Bench(ctx, firefox.Options{
			URL:          url,
			Protocol:     req.Protocol,
			CAPEM:        []byte(req.Target.CAPEM),
			Timeout:      req.Timeout,
			DisableCache: true,
			KeyLogFile:   req.KeyLog,
		}, workload.BenchResultJS)
	}
}
