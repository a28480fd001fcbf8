package plan

import (
	"fmt"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// The browser clients other than lighthouse (chromium, and firefox when it
// is a client) run the tests whose definition sets bench in quicbench's
// bench page: a page of quicbench's server (/bench) whose script runs the
// test with fetch() and reports what it measured from the Performance API
// and its own timestamps (docs/metrics.md, "Browser clients"). The limits
// below are the browsers'; plan validation enforces them and the client
// agent checks them again (BrowserUnsupported).

// Limits of the tests a browser runs in the bench page.
const (
	// BrowserTTFBMinSize is the smallest size of a ttfb test in a browser:
	// the measured resource is the bench page's document itself, padded
	// to the size, and the document with its script tag takes some bytes.
	BrowserTTFBMinSize = 512
	// BrowserTTFBMaxSize bounds that document: the browser loads and
	// parses all of it before the page runs.
	BrowserTTFBMaxSize = 10 * mb
	// BrowserUploadMaxSize bounds a browser's upload: the page holds the
	// request body in memory (a Uint8Array), and the browser copies it
	// once more to its network process.
	BrowserUploadMaxSize = 1 * gb
)

// benchClient reports whether a client runs tests in the bench page: a
// browser client whose description says bench (not an audit client, which
// audits pages only).
func benchClient(c string) bool {
	st, ok := peers.ClientStack(c)
	return ok && st.Client.Kind == peers.KindBrowser && st.Client.Bench
}

// noBench says why a browser cannot run a test that has no bench form.
var noBench = map[string]string{
	TestHandshake: "a browser owns its connections' life: it cannot be told to resume a TLS session or to send 0-RTT data, and does not say whether it did (a browser's ttfb includes a full handshake)",
	TestCPU:       "a browser's CPU time is spread over its browser, network, renderer and GPU processes, which do far more than move the bytes, so its CPU per MB is no measure of its HTTP stack",
}

// browserTestUnsupported says why a browser client cannot run a test at
// all ("" if it can).
func browserTestUnsupported(t *testDef, c string) string {
	switch {
	case t.browser:
		return ""
	case t.bench && benchClient(c):
		return ""
	case benchClient(c):
		if why := noBench[t.name]; why != "" {
			return fmt.Sprintf("the %s client does not run %s: %s", c, t.name, why)
		}
		return fmt.Sprintf("the %s client does not run %s", c, t.name)
	}
	return fmt.Sprintf("the %s client runs only page and site tests, not %s", c, t.name)
}

// benchServerUnsupported says why a server cannot serve a browser's test
// in the bench page: only quicbench's server serves the page (/bench,
// /bench.js, with the headers that raise the browser's timer resolution)
// beside the resources it fetches.
func benchServerUnsupported(t *testDef, client, server string) string {
	if !t.bench || !benchClient(client) || server == model.ServerQuicbench {
		return ""
	}
	return fmt.Sprintf("the %s client runs %s in quicbench's bench page, which only quicbench's server serves", client, t.name)
}

// BrowserUnsupported says why a browser client cannot run a test with
// parameters p in the bench page ("" if it can, and for the tests a browser
// runs as page loads).
func BrowserUnsupported(test string, p Params, client string) string {
	t := lookupTest(test)
	if t == nil || !benchClient(client) || !t.bench {
		return ""
	}
	switch test {
	case TestTTFB:
		if p.Size < BrowserTTFBMinSize || p.Size > BrowserTTFBMaxSize {
			return fmt.Sprintf("the %s client measures ttfb on the bench page's document, padded to the size: size %s is outside %s..%s",
				client, FormatSize(p.Size), FormatSize(BrowserTTFBMinSize), FormatSize(BrowserTTFBMaxSize))
		}
	case TestUpload:
		if p.Size > BrowserUploadMaxSize {
			return fmt.Sprintf("the %s client holds an upload's body in the page's memory: size %s is above %s",
				client, FormatSize(p.Size), FormatSize(BrowserUploadMaxSize))
		}
	}
	return ""
}

// comboBrowserUnsupported is BrowserUnsupported for one parameter
// combination of a test entry.
func comboBrowserUnsupported(t *testDef, combo []model.Factor, client string) string {
	if !t.bench || !benchClient(client) {
		return ""
	}
	p, err := t.decode(func(name string) (string, bool) {
		for _, f := range combo {
			if f.Name == name {
				return f.Value, true
			}
		}
		return "", false
	}, true)
	if err != nil {
		return "" // reported by the parameter checks
	}
	return BrowserUnsupported(t.name, p, client)
}

// IsBenchTest reports whether a browser client (other than lighthouse)
// runs test in the bench page.
func IsBenchTest(test string) bool {
	t := lookupTest(test)
	return t != nil && t.bench
}
