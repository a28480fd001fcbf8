package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The runner's per-sample overhead, as stored with each sample, is
// summarised (nearest-rank p50, p95, max over every sample) in the text
// summary and in the HTML environment, next to the browser version.
func TestOverheadAndBrowserShown(t *testing.T) {
	ds := smallDataset()
	n := len(ds.Samples)
	for i := range ds.Samples {
		ds.Samples[len(ds.Samples)-1-i].Overhead = time.Duration(i+1) * time.Millisecond
	}
	want := fmt.Sprintf("%dms / %dms / %dms over %d samples", (n+1)/2, (95*n+99)/100, n, n)
	opts := goldenOpts()
	var buf bytes.Buffer
	if err := Text(&buf, ds, opts); err != nil {
		t.Fatal(err)
	}
	if line := "Per-sample overhead (outside the measured part) p50 / p95 / max: " + want + "\n"; !strings.Contains(buf.String(), line) {
		t.Errorf("text summary lacks %q:\n%s", line, buf.String())
	}
	html := string(renderHTML(t, ds, opts))
	for _, row := range []string{
		"<tr><th>per-sample overhead (p50 / p95 / max)</th><td>" + want + "</td></tr>",
		"<tr><th>Chromium</th><td>Chrome/156.0.8078.79</td></tr>",
	} {
		if !strings.Contains(html, row) {
			t.Errorf("HTML lacks %q", row)
		}
	}
	// no browser, no row
	opts.Browser = ""
	if html := string(renderHTML(t, ds, opts)); strings.Contains(html, "<th>Chromium</th>") {
		t.Error("Chromium row without a browser")
	}
}
