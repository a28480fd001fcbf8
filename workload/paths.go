package workload

import (
	"fmt"

	"github.com/quicbench/quicbench/plan"
)

// StaticPaths returns the URL paths, without query strings, that the
// built-in client requests in a sample of test with parameters p, for a
// server that serves files prepared in advance (Caddy): /echo (every warm
// connection's first request), /bytes/N and /page/N/SIZE (the page and
// its objects, which the server materializes together). Sites are served
// from their directories and need no path; upload and stream have no
// file form and return nil.
func StaticPaths(test string, p plan.Params) []string {
	bytes := func(n int64) string { return fmt.Sprintf("/bytes/%d", n) }
	switch test {
	case plan.TestDownload, plan.TestTTFB, plan.TestCPU:
		return []string{"/echo", bytes(p.Size)}
	case plan.TestLatency:
		if p.Size > 0 {
			return []string{"/echo", bytes(p.Size)}
		}
		return []string{"/echo"}
	case plan.TestHandshake:
		return []string{"/echo"}
	case plan.TestMultiplex:
		return []string{"/echo", bytes(p.Size)}
	case plan.TestPage:
		return []string{"/echo", runs[plan.TestPage].path(p)}
	case plan.TestSite:
		return []string{"/echo"}
	}
	return nil
}
