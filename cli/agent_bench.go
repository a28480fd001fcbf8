package cli

import (
	"context"

	"github.com/quicbench/quicbench/workload"
)

// chromiumBench returns the agent's Chromium driver of the bench page
// (workload.BrowserBench): every sample in a fresh browser context of the
// agent's Chromium for its protocol (or a fresh browser, browser_restart:
// always), the HTTP cache disabled, forced to the sample's protocol: it
// loads the page, reads its result, and closes the context.
func (a *agentBrowsers) chromiumBench() workload.BrowserBench { return benchIn(a.inChromium) }

// firefoxBench returns the agent's Firefox driver of the bench page: as
// chromiumBench, in a fresh user context of the agent's headless Firefox,
// which trusts the server's CA (Target.CAPEM) and, for h3, reaches the
// origin over HTTP/3 from its first request.
func (a *agentBrowsers) firefoxBench() workload.BrowserBench { return benchIn(a.inFirefox) }

// benchIn is the bench page driver of a browser client whose pages in runs.
func benchIn(in func(context.Context, workload.Request, string, func(context.Context, page) error) (browserRun, error)) workload.BrowserBench {
	return func(ctx context.Context, req workload.Request, url string) ([]byte, *workload.BrowserReport, error) {
		var out []byte
		run, err := in(ctx, req, url, func(ctx context.Context, p page) error {
			var err error
			out, err = p.Bench(ctx, url, workload.BenchResultJS)
			return err
		})
		return out, run.report(), err
	}
}
