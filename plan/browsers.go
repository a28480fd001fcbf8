package plan

import (
	"time"

	"github.com/quicbench/quicbench/model"
)

// What a sample of a browser client costs the reference machine, in time
// and in CPU, in one place: the estimate (estimateParams) and the
// admission rule (CellLoad) read these and nothing else about browsers.
// docs/plan-format.md ("Estimated duration", "Parallel testbeds") and
// docs/performance.md ("Browser samples: time and CPU") say how they were
// measured.
//
// The per-sample figures (estChromiumOverhead, estChromiumSampleCPU and
// Firefox's) are those of the browser's life cycle around a sample. With a
// browser kept running on a testbed and a fresh context per sample (issue
// 28), that is a context's creation and teardown; they are set to what
// was measured by hand with one browser kept running (a Chromium browser
// context over DevTools, a Firefox user context over WebDriver BiDi, each
// created, given a tab and removed; 2026-11, the machine heavily loaded:
// docs/performance.md, "Browser samples: time and CPU"), until the agent's
// own measurement replaces them. With a browser started with a fresh
// profile and closed per sample they were: Chromium 0.8 s and 1.2 CPU
// seconds, Firefox 2 s and 3.5 CPU seconds (the start and teardown's wall
// time in quick, three-sites and implementations runs on a quiet machine;
// their CPU time the client CPU of bench page TTFB samples less the page:
// 1.36 and 3.67 s mean).
const (
	// estChromiumOverhead is the wall time a Chromium sample costs beyond
	// its load: creating and removing a browser context (0.7-1.2 s under
	// a load average of 23-70, its CPU time 0.45 s: about 0.4 s on an idle
	// machine).
	estChromiumOverhead = 400 * time.Millisecond
	// estChromiumSampleCPU is the CPU time of Chromium's processes for
	// that (0.43-0.48 s: a context with a tab on about:blank, created and
	// disposed, its renderer process included).
	estChromiumSampleCPU = 450 * time.Millisecond
	// estChromiumPageWork is Chromium's own work inside a page load
	// (renderer, parsing, layout, paint): about 120 ms on a clean link.
	// estChromiumPageCPU is the CPU time of a page load beyond its bytes
	// and requests: the renderer's work, the navigation, the driver's
	// reading of the page's timings (the intercept of the fit of 112
	// samples of page and bench tests, less the browser's start and
	// teardown).
	estChromiumPageWork = 120 * time.Millisecond
	estChromiumPageCPU  = 300 * time.Millisecond

	// estFirefoxOverhead and estFirefoxSampleCPU are the same for Firefox:
	// a user context created with a tab and removed, 0.23-0.34 s and
	// 0.20-0.24 CPU seconds.
	estFirefoxOverhead  = 300 * time.Millisecond
	estFirefoxSampleCPU = 200 * time.Millisecond
	// estFirefoxPageWork is taken to be Chromium's; estFirefoxPageCPU is
	// fitted as Chromium's (97 samples).
	estFirefoxPageWork = 120 * time.Millisecond
	estFirefoxPageCPU  = 250 * time.Millisecond
)

// browserCost is what one browser client's sample costs beyond the
// network work the built-in client's would do.
type browserCost struct {
	// overhead is the wall time of the browser's life cycle around a
	// sample, and sampleCPU the CPU time of the browser's processes for it.
	overhead, sampleCPU time.Duration
	// pageWork is the browser's own time inside each page it loads (a page
	// test's page, the bench page), and pageCPU the CPU time of a page
	// load beyond its requests and bytes.
	pageWork, pageCPU time.Duration
	// tcp and quic are the CPU the browser's processes spend on a
	// sample's requests, bytes and open seconds, per transport (its
	// network service, its IPC to the page, the page's script reading the
	// bytes, the page's timers and frames).
	tcp, quic endpointCPU
}

// The browsers' own CPU for a sample's connections, requests, bytes and
// open seconds (the server's is its half of the built-in client's model):
// fitted on 224 samples of page, ttfb, latency, download, upload,
// multiplex and stream tests over a 10 Mbit/s link at 50 ms and a lossy
// 100 ms one, per browser and transport. The browser reads the bytes into
// the page's script, which costs Chromium a fifth to a third of a CPU
// second per MB, and keeps the page running (timers, frames): 33-73 ms of
// CPU per second.
var (
	browserCPUChromiumTCP  = endpointCPU{perRequest: 11 * time.Millisecond, perMB: 190 * time.Millisecond, perSecond: 33 * time.Millisecond}
	browserCPUChromiumQUIC = endpointCPU{perRequest: 15 * time.Millisecond, perMB: 333 * time.Millisecond, perSecond: 73 * time.Millisecond}
	browserCPUFirefoxTCP   = endpointCPU{perRequest: 11 * time.Millisecond, perMB: 10 * time.Millisecond, perSecond: 64 * time.Millisecond}
	browserCPUFirefoxQUIC  = endpointCPU{perRequest: 18 * time.Millisecond, perMB: 10 * time.Millisecond, perSecond: 68 * time.Millisecond}
)

// browserCosts holds the browser clients' costs. Lighthouse runs in
// Chromium and costs what a Chromium sample does plus its audit
// (estLighthouseWork).
var browserCosts = map[string]browserCost{
	model.ClientChromium: {
		overhead: estChromiumOverhead, sampleCPU: estChromiumSampleCPU,
		pageWork: estChromiumPageWork, pageCPU: estChromiumPageCPU,
		tcp: browserCPUChromiumTCP, quic: browserCPUChromiumQUIC,
	},
	model.ClientFirefox: {
		overhead: estFirefoxOverhead, sampleCPU: estFirefoxSampleCPU,
		pageWork: estFirefoxPageWork, pageCPU: estFirefoxPageCPU,
		tcp: browserCPUFirefoxTCP, quic: browserCPUFirefoxQUIC,
	},
}

// browserCostOf returns the costs of a browser client (Lighthouse:
// Chromium's), and false for a client that is no browser.
func browserCostOf(client string) (browserCost, bool) {
	if client == model.ClientLighthouse {
		client = model.ClientChromium
	}
	c, ok := browserCosts[client]
	return c, ok
}

// The memory a running browser holds: the proportional set size of all its
// processes while it loads a page (browser, renderer, network and GPU
// processes): Chromium 393 MB, Firefox 309 MB p50 and 483 MB at most over
// the samples of a run taken twice a second, 2026-11.
const (
	estChromiumMemory = 400 << 20
	estFirefoxMemory  = 500 << 20
)
