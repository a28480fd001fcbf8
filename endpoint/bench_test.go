package endpoint

import (
	"strconv"
	"strings"
	"testing"
)

// TestBenchPage checks the bench page's document and script: the headers
// that make it cross-origin isolated, the ttfb document padded to exactly
// its size, and the sizes it refuses.
func TestBenchPage(t *testing.T) {
	for _, target := range []string{"/bench?test=download&size=1000", "/bench.js", "/bench?test=ttfb&size=512", "/bench?test=ttfb&size=100KB"} {
		w := serve(t, "GET", target, "")
		if w.Code != 200 {
			t.Fatalf("%s: status %d: %s", target, w.Code, w.Body)
		}
		if w.Header().Get("Cross-Origin-Opener-Policy") != "same-origin" || w.Header().Get("Cross-Origin-Embedder-Policy") != "require-corp" {
			t.Errorf("%s: headers %v: not cross-origin isolated", target, w.Header())
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: cacheable", target)
		}
		body := w.Body.String()
		if cl := w.Header().Get("Content-Length"); cl == "" || cl != strconv.Itoa(len(body)) {
			t.Errorf("%s: Content-Length %q, body %d bytes", target, cl, len(body))
		}
		switch {
		case target == "/bench.js":
			if !strings.Contains(body, "window.__qbResult") || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") {
				t.Errorf("bench.js: %q...", body[:min(80, len(body))])
			}
		case strings.Contains(target, "ttfb"):
			want := map[string]int{"/bench?test=ttfb&size=512": 512, "/bench?test=ttfb&size=100KB": 100000}[target]
			if len(body) != want || !strings.HasPrefix(body, benchDoc) || !strings.HasSuffix(body, "-->\n") {
				t.Errorf("%s: %d bytes, want %d: a padded bench document", target, len(body), want)
			}
		default:
			if body != benchDoc || !strings.Contains(body, `<script src="/bench.js">`) {
				t.Errorf("%s: %q", target, body)
			}
		}
	}
	if len(benchDoc)+8 > BenchDocMin {
		t.Errorf("the bench document (%d bytes) and its padding do not fit in %d bytes", len(benchDoc), BenchDocMin)
	}
	for _, target := range []string{"/bench?test=ttfb", "/bench?test=ttfb&size=511", "/bench?test=ttfb&size=2GB", "/bench?test=ttfb&size=x"} {
		if w := serve(t, "GET", target, ""); w.Code != 400 || !strings.Contains(w.Body.String(), "want a size from 512 B to 1 GiB") {
			t.Errorf("%s: status %d %q, want 400", target, w.Code, w.Body)
		}
	}
}
