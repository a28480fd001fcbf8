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
// Firefox's) are those of the browser's life cycle around a sample: today
// a browser started with a fresh profile and closed after it; with a
// browser kept running across samples and a fresh context per sample,
// the creation and teardown of that context. Set them from the
// measurement of whichever the agent does.
const (
	// estChromiumOverhead is the wall time a Chromium sample costs beyond
	// its load: starting the browser with a fresh profile, then closing it
	// and removing the profile (mean 0.60 s over the 36 Chromium samples
	// of a quick run, 0.99 s over the 279 of a three-sites run).
	estChromiumOverhead = 800 * time.Millisecond
	// estChromiumSampleCPU is the CPU time of Chromium's processes for
	// that start and teardown.
	estChromiumSampleCPU = 900 * time.Millisecond
	// estChromiumPageWork is Chromium's own work inside a page load
	// (renderer, parsing, layout, paint): about 120 ms on a clean link.
	// estChromiumPageCPU is the CPU time of a page load beyond its bytes
	// and requests (the renderer's work, the navigation's IPC).
	estChromiumPageWork = 120 * time.Millisecond
	estChromiumPageCPU  = 150 * time.Millisecond

	// estFirefoxOverhead is the same for Firefox: its start with a fresh
	// profile (the test CA imported, prefs written) and its teardown; 1.75-
	// 2.2 s mean per server over the 75 Firefox samples of an
	// implementations run. estFirefoxSampleCPU is its CPU time.
	estFirefoxOverhead  = 2 * time.Second
	estFirefoxSampleCPU = 2 * time.Second
	// estFirefoxPageWork and estFirefoxPageCPU are Chromium's figures for
	// Firefox.
	estFirefoxPageWork = 120 * time.Millisecond
	estFirefoxPageCPU  = 150 * time.Millisecond
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
	// net is the CPU the browser's processes and the server spend on a
	// sample's connections, requests, bytes and open seconds, per
	// transport (the browser's network service, its IPC to the page and
	// the page's script reading the bytes, and the server's side).
	tcp, quic endpointCPU
}

// browserCosts holds the browser clients' costs. Lighthouse runs in
// Chromium and costs what a Chromium sample does plus its audit
// (estLighthouseWork).
var browserCosts = map[string]browserCost{
	model.ClientChromium: {
		overhead: estChromiumOverhead, sampleCPU: estChromiumSampleCPU,
		pageWork: estChromiumPageWork, pageCPU: estChromiumPageCPU,
		tcp:  endpointCPUTCP,
		quic: endpointCPUQUIC,
	},
	model.ClientFirefox: {
		overhead: estFirefoxOverhead, sampleCPU: estFirefoxSampleCPU,
		pageWork: estFirefoxPageWork, pageCPU: estFirefoxPageCPU,
		tcp:  endpointCPUTCP,
		quic: endpointCPUQUIC,
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
// processes), measured on the reference machine.
const (
	estChromiumMemory = 400 << 20
	estFirefoxMemory  = 500 << 20
)
