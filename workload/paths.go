package workload

import (
	"fmt"

	"github.com/quicbench/quicbench/plan"
)

// StaticPaths returns the URL paths, without query strings, that the
// built-in client requests in a sample of test with parameters p, for a
// server that serves files prepared in advance (Caddy): /bytes/N and
// /page/N/SIZE (the page and its objects, which the server materializes
// together). /echo (every warm connection's first request, and the
// handshake test's) is a file such a server always has; sites are served
// from their directories. Tests that need neither return nil, as do upload
// and stream, which have no file form.
func StaticPaths(test string, p plan.Params) []string {
	bytes := func(n int64) string { return fmt.Sprintf("/bytes/%d", n) }
	switch test {
	case plan.TestDownload, plan.TestTTFB, plan.TestCPU:
		return []string{bytes(p.Size)}
	case plan.TestLatency:
		if p.Size > 0 {
			return []string{bytes(p.Size)}
		}
	case plan.TestMultiplex:
		return []string{bytes(p.Size)}
	case plan.TestPage:
		return []string{runs[plan.TestPage].path(p)}
	}
	return nil
}
