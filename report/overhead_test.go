package report

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
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
		"<tr><th>browsers</th><td>Chrome/156.0.8078.79</td></tr>",
	} {
		if !strings.Contains(html, row) {
			t.Errorf("HTML lacks %q", row)
		}
	}
	// no browser, no row
	opts.Browser = ""
	if html := string(renderHTML(t, ds, opts)); strings.Contains(html, "<th>browsers</th>") {
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

// Each client's overhead is broken down into the link drain, the test's
// unmeasured preparation and the rest (the runner's own work; for Chromium
// with the browser's teardown), each by nearest rank over the client's
// samples.
func TestOverheadParts(t *testing.T) {
	ms := time.Millisecond
	ds := &model.Dataset{
		Cells: []model.Cell{{ID: 1, Client: model.ClientBuiltin}, {ID: 2, Client: "chromium"}},
		Samples: []model.Sample{
			{CellID: 1, Overhead: 10 * ms, Drain: 2 * ms},
			{CellID: 2, Overhead: 1000 * ms, Prep: 600 * ms},
			{CellID: 1, Overhead: 150 * ms, Drain: 25 * ms, Prep: 120 * ms}, // a latency sample
			{CellID: 1, Overhead: 5 * ms, Drain: 1 * ms},
			{CellID: 2, Overhead: 900 * ms, Prep: 640 * ms},
		},
	}
	want := []kv{
		{"per-sample overhead, built-in client (p50 / p95 / max)", "10ms / 150ms / 150ms over 3 samples"},
		{"  of which waiting for connections to close across the link", "2ms / 25ms / 25ms over 3 samples"},
		{"  of which the test's unmeasured preparation (connecting, priming)", "0s / 120ms / 120ms over 3 samples"},
		{"  of which the runner's own work", "5ms / 8ms / 8ms over 3 samples"}, // 8, 5, 4
		{"per-sample overhead, Chromium (a context per sample, browser starts included) (p50 / p95 / max)", "900ms / 1s / 1s over 2 samples"},
		{"  of which the test's unmeasured preparation (browser start; a warm page's priming load or the bench page's load)", "600ms / 640ms / 640ms over 2 samples"},
		{"  of which the runner's own work and the browser's teardown", "260ms / 400ms / 400ms over 2 samples"}, // 400, 260
	}
	if got := overheadRows(ds); !slices.Equal(got, want) {
		t.Errorf("overheadRows:\n got %q\nwant %q", got, want)
	}
	// A preparation without a drain: no drain row; the runner's own work
	// is then 10, 30 and 5 ms.
	for i := range ds.Samples {
		ds.Samples[i].Drain = 0
	}
	rows := overheadRows(ds)
	if len(rows) != 6 || rows[1].K != want[2].K || rows[1].V != want[2].V || rows[2].K != want[3].K || rows[2].V != "10ms / 30ms / 30ms over 3 samples" {
		t.Errorf("without drain: %q", rows)
	}
}

// The comparison shows each part for both runs, "–" for a run that recorded
// no part (one of an older quicbench).
func TestCompareOverheadParts(t *testing.T) {
	a, b := smallDataset(), secondRun()
	for i := range a.Samples {
		a.Samples[i].Overhead = 4 * time.Millisecond
	}
	for i := range b.Samples {
		b.Samples[i].Overhead = 150 * time.Millisecond
		b.Samples[i].Drain = 25 * time.Millisecond
		b.Samples[i].Prep = 120 * time.Millisecond
	}
	n := len(b.Samples)
	var h bytes.Buffer
	if err := CompareHTML(&h, a, b, Options{Source: "before.db", SourceB: "after.db"}, RunNotes{}, RunNotes{}); err != nil {
		t.Fatal(err)
	}
	over := func(d string) string { return fmt.Sprintf("%s / %s / %s over %d samples", d, d, d, n) }
	for _, row := range []string{
		"<th>  of which waiting for connections to close across the link</th><td>–</td><td>" + over("25ms") + "</td></tr>",
		"<th>  of which the test&#39;s unmeasured preparation (connecting, priming)</th><td>–</td><td>" + over("120ms") + "</td></tr>",
		"<th>  of which the runner&#39;s own work</th><td>–</td><td>" + over("5ms") + "</td></tr>",
	} {
		if !strings.Contains(h.String(), row) {
			t.Errorf("compare HTML lacks %q", row)
		}
	}
}
