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
		// overheads 1..n ms; the drain is 1 ms of each
		ds.Samples[len(ds.Samples)-1-i].Overhead = time.Duration(i+1) * time.Millisecond
		ds.Samples[len(ds.Samples)-1-i].Drain = time.Millisecond
	}
	want := fmt.Sprintf("%dms / %dms / %dms over %d samples", (n+1)/2, (95*n+99)/100, n, n)
	drain := fmt.Sprintf("1ms / 1ms / 1ms over %d samples", n)
	own := fmt.Sprintf("%dms / %dms / %dms over %d samples", (n+1)/2-1, (95*n+99)/100-1, n-1, n)
	opts := goldenOpts()
	var buf bytes.Buffer
	if err := Text(&buf, ds, opts); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"Per-sample overhead, built-in client (p50 / p95 / max): " + want + "\n",
		"  of which waiting for connections to close across the link: " + drain + "\n",
		"  of which the runner's own work: " + own + "\n",
	} {
		if !strings.Contains(buf.String(), line) {
			t.Errorf("text summary lacks %q:\n%s", line, buf.String())
		}
	}
	html := string(renderHTML(t, ds, opts))
	for _, row := range []string{
		"<tr><th>per-sample overhead, built-in client (p50 / p95 / max)</th><td>" + want + "</td></tr>",
		"<tr><th>  of which the runner&#39;s own work</th><td>" + own + "</td></tr>",
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
	// no drain recorded (a run of an older quicbench): no breakdown
	for i := range ds.Samples {
		ds.Samples[i].Drain = 0
	}
	if html := string(renderHTML(t, ds, opts)); strings.Contains(html, "of which") {
		t.Error("drain breakdown drawn without a recorded drain")
	}
}
