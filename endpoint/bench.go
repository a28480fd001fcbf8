package endpoint

import (
	"bytes"
	_ "embed" // the bench page's script
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/quicbench/quicbench/endpoint/content"
)

// benchJS is the script of the bench page: it runs the test its URL names
// with fetch() and publishes what it observed as window.__qbResult.
//
//go:embed bench.js
var benchJS []byte

// benchDoc is the bench page's document. Its script loads from /bench.js,
// so that the document can be small: the ttfb test measures the document
// itself and pads it to the test's size.
const benchDoc = `<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>quicbench bench</title>
<script src="/bench.js"></script></head><body></body></html>
`

// BenchDocMin is the smallest document /bench serves: a ttfb test of a
// smaller size cannot be measured in a browser (the bench page itself is
// the measured resource).
const BenchDocMin = 512

// maxBenchDoc bounds the padded document of the ttfb test.
const maxBenchDoc = 1 << 30

// isolate sets the headers that make the bench page cross-origin isolated:
// its clock (performance.now(), Resource Timing) is then coarsened to 5 us
// in Chromium instead of 100 us, and to 20 us in Firefox instead of 1 ms.
// Every resource the page fetches is of its own origin, which
// require-corp allows.
func isolate(h http.Header) {
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Embedder-Policy", "require-corp")
}

// handleBench serves the bench page: /bench?test=NAME&PARAMS. For
// test=ttfb the document is padded (with an HTML comment after its end) to
// size bytes, at least BenchDocMin.
func handleBench(w http.ResponseWriter, r *http.Request) {
	size := int64(len(benchDoc))
	if r.URL.Query().Get("test") == "ttfb" {
		n, err := content.ParseSize(r.URL.Query().Get("size"))
		if err != nil || n < BenchDocMin || n > maxBenchDoc {
			badRequest(w, "/bench?test=ttfb: size=%q: want a size from %d B to 1 GiB (the padded document)", r.URL.Query().Get("size"), BenchDocMin)
			return
		}
		size = n
	}
	drain(r)
	isolate(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	if r.Method == http.MethodHead {
		return
	}
	if _, err := io.WriteString(w, benchDoc); err != nil {
		return
	}
	if pad := size - int64(len(benchDoc)); pad > 0 {
		_, _ = io.WriteString(w, "<!--")
		_, _ = io.Copy(w, io.LimitReader(repeatReader{}, pad-8))
		_, _ = io.WriteString(w, "-->\n")
	}
}

// repeatReader reads an endless run of spaces (the bench document's
// padding).
type repeatReader struct{}

func (repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], spaces)
	}
	return n, nil
}

var spaces = bytes.Repeat([]byte{' '}, 64<<10)

// handleBenchJS serves the bench page's script.
func handleBenchJS(w http.ResponseWriter, r *http.Request) {
	drain(r)
	isolate(w.Header())
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Content-Length", fmt.Sprint(len(benchJS)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(benchJS)
}
