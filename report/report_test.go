package report

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var svgRE = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// normalizeSVG replaces every inline SVG by its size and SHA-256, so the
// golden files stay readable while any change to a chart still shows.
func normalizeSVG(b []byte) []byte {
	return svgRE.ReplaceAllFunc(b, func(m []byte) []byte {
		return fmt.Appendf(nil, `<svg sha256="%x" bytes="%d"></svg>`, sha256.Sum256(m), len(m))
	})
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(run go test ./report -update if the change is intended)", path, i+1, truncate(g, 300), truncate(w, 300))
			}
		}
	}
}

func goldenOpts() Options {
	return Options{Source: "results.db", MaxGroupCharts: 2, RunWarnings: []string{"machine has only 2 CPUs: client, server and emulator share them"},
		Browser: "Chrome/156.0.8078.79"}
}

func renderHTML(t testing.TB, ds *model.Dataset, opts Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := HTML(&buf, ds, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestHTMLGolden(t *testing.T) {
	out := renderHTML(t, smallDataset(), goldenOpts())
	if bytes.Contains(out, []byte("could not be drawn")) {
		t.Error("a chart failed to draw")
	}
	again := renderHTML(t, smallDataset(), goldenOpts())
	if !bytes.Equal(out, again) {
		t.Fatal("two renderings of the same dataset differ")
	}
	golden(t, "report.golden.html", normalizeSVG(out))
}

func TestHTMLContent(t *testing.T) {
	out := string(renderHTML(t, smallDataset(), goldenOpts()))
	for _, want := range []string{
		// verdicts: h3 faster under loss, h2 better for upload goodput
		`<td class="v quic" data-l="Verdict">QUIC faster</td>`,
		`<td class="v tcp" data-l="Verdict">TCP better</td>`,
		`no significant difference`,
		// the first screen
		`<section id="answer">`, `class="fig matrix"`, `class="fig forest"`, `negligible ±5%`,
		// figures of every study
		`Mean with 95% CI and median`,     // A
		`CDF: `,                           // B
		`Decision tree`,                   // B
		`Δ mean vs ref`,                   // C
		`Per site or page`,                // D
		`Relative difference of medians`,  // E
		`Head-of-line blocking timelines`, // A
		`Streaming consistency`,           // A
		`CPU over time`,                   // E part 3
		`Resource waterfalls`,             // D / browser
		`Transport statistics: why`,
		// validity
		`timeout after 30s waiting for the response body ×1 (iteration 5)`,
		`resource /page/obj3.jpg used h2, want h3`,
		`CPU saturated: 97% of 2 cores busy during the sample`,
		`machine has only 2 CPUs: client, server and emulator share them`,
		// environment
		`go1.26.8`, `net.ipv4.tcp_wmem`, `name: study-mix`,
		`Per-configuration figures are drawn for 2 of the 4 configurations`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// the tree of the page grid: delay decides
	if !strings.Contains(out, `<span class="split">delay = 109ms</span>: <strong class="leaf">h3 (2)</strong>`) {
		t.Error("decision tree does not show h3 winning on the long path")
	}
	// with two per-configuration charts allowed, the CDFs are those of the
	// two configurations with the largest QUIC-vs-TCP difference
	for _, c := range []struct {
		title string
		drawn bool
	}{{"CDF: rate=10mbit · delay=109ms", true}, {"CDF: rate=50mbit · delay=109ms", true}, {"CDF: rate=10mbit · delay=9ms", false}, {"CDF: rate=50mbit · delay=9ms", false}} {
		if strings.Contains(out, c.title) != c.drawn {
			t.Errorf("%q drawn = %v, want %v", c.title, !c.drawn, c.drawn)
		}
	}
	// every chart is an inline SVG with a size
	if n := strings.Count(out, "<svg "); n < 20 {
		t.Errorf("only %d charts", n)
	}
	// the matrix has one cell per group with comparisons, and every line
	// of it and of the forest plot links to a row that exists
	an, err := stats.Analyze(smallDataset(), Options{}.withDefaults(smallDataset()).Stats)
	if err != nil {
		t.Fatal(err)
	}
	groups := 0
	for _, g := range an.Groups {
		if len(g.Comparisons) > 0 {
			groups++
		}
	}
	if n := strings.Count(out, `<g class="mcell"`); n != groups || groups != 10 {
		t.Errorf("%d matrix cells for %d groups, want 10", n, groups)
	}
	links := regexp.MustCompile(`<a href="#(cmp-\d+)">`).FindAllStringSubmatch(out, -1)
	if len(links) < 2*len(an.Comparisons) {
		t.Errorf("%d links to comparison rows for %d comparisons, want the matrix's and the forest's", len(links), len(an.Comparisons))
	}
	for _, l := range links {
		if !strings.Contains(out, `<tr id="`+l[1]+`">`) {
			t.Errorf("link to #%s, which no row carries", l[1])
		}
	}
}

// TestSelfContained checks that the report references nothing outside the
// file: no scripts, links, images, imports or URLs (the SVG namespace
// declarations are identifiers, never fetched).
func TestSelfContained(t *testing.T) {
	out := string(renderHTML(t, smallDataset(), goldenOpts()))
	out = strings.ReplaceAll(out, `xmlns="http://www.w3.org/2000/svg"`, "")
	out = strings.ReplaceAll(out, `xmlns:xlink="http://www.w3.org/1999/xlink"`, "")
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "src=", "@import", "url(", "http://", "https://", "//fonts."} {
		if strings.Contains(out, bad) {
			i := strings.Index(out, bad)
			t.Errorf("report contains %q: …%s…", bad, out[max(0, i-80):min(len(out), i+80)])
		}
	}
}

func TestTextGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := Text(&buf, smallDataset(), goldenOpts()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"QUIC faster", "TCP better", "h3 vs h2", "COMPARISON", "Failed or invalid samples: 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("text summary lacks %q", want)
		}
	}
	// aligned columns: every comparison row has its verdict at one column
	col := -1
	for _, line := range strings.Split(out, "\n") {
		for _, v := range []string{"QUIC faster", "TCP better", "no significant difference"} {
			if i := strings.Index(line, v); i >= 0 && strings.Contains(line, " vs ") {
				r := len([]rune(line[:i]))
				if col >= 0 && r != col {
					t.Errorf("verdict at column %d, earlier at %d: %q", r, col, line)
				}
				col = r
			}
		}
	}
	golden(t, "report.golden.txt", buf.Bytes())
}

// secondRun derives run B from the small dataset: h3's download at
// baseline gets faster, the upload cell changes congestion control, and one
// cell exists only in each run.
func secondRun() *model.Dataset {
	ds := smallDataset()
	ds.Run.ID = 8
	ds.Run.Env.Commit = "def5678"
	ds.Run.Env.QuicGoVersion = "v0.66.0"
	byCell := map[int64]*model.Cell{}
	for i := range ds.Cells {
		byCell[ds.Cells[i].ID] = &ds.Cells[i]
	}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		c := byCell[s.CellID]
		if c.Key == "baseline/download/size=1MB/h3/builtin/cubic" {
			s.Value *= 0.8
		}
	}
	for i := range ds.Cells {
		c := &ds.Cells[i]
		if c.Test == "upload" {
			c.CC = "bbr"
			c.Key = strings.Replace(c.Key, "/cubic", "/bbr", 1)
			c.Group = strings.Replace(c.Group, "/cubic", "/bbr", 1)
		}
		if c.Test == "cpu" && c.Protocol == "h2" {
			c.Key = "baseline/cpu/size=700MB/h1/builtin/cubic"
			c.Protocol = "h1"
		}
	}
	return ds
}

func TestCompareGolden(t *testing.T) {
	a, b := smallDataset(), secondRun()
	for i := range b.Samples {
		b.Samples[i].Overhead = time.Duration(i+1) * time.Millisecond
	}
	opts := Options{Source: "before.db", SourceB: "after.db"}
	na := RunNotes{Browser: "Chrome/156.0.8078.79"}
	nb := RunNotes{Browser: "Chrome/157.0.8100.12", Warnings: []string{"machine has only 2 CPUs", "clock <jumped>"}}
	var h, txt bytes.Buffer
	if err := CompareHTML(&h, a, b, opts, na, nb); err != nil {
		t.Fatal(err)
	}
	if err := CompareText(&txt, a, b, opts, na, nb); err != nil {
		t.Fatal(err)
	}
	ht, tt := h.String(), txt.String()
	for _, want := range []string{"B faster", "only in A: baseline/cpu/size=700MB/h2/builtin/cubic", "only in B: baseline/cpu/size=700MB/h1/builtin/cubic", "(2 ignoring congestion control)",
		"from after.db, browser Chrome/157.0.8100.12\n", "B: warning about the whole run: clock <jumped>\n"} {
		if !strings.Contains(tt, want) {
			t.Errorf("compare text lacks %q", want)
		}
	}
	overA := stats.DatasetOverheads(a)[0].Total
	nB := len(b.Samples)
	overB := fmt.Sprintf("%dms / %dms / %dms over %d samples", (nB+1)/2, (95*nB+99)/100, nB, nB)
	for _, want := range []string{`<td class="v b">B faster</td>`, `(cc differs)`, `v0.66.0`, `<tr class="differs"><th>quic-go</th>`,
		`<tr class="differs"><th>browsers</th><td>Chrome/156.0.8078.79</td><td>Chrome/157.0.8100.12</td></tr>`,
		`<tr class="differs"><th>per-sample overhead, built-in client (p50 / p95 / max)</th><td>` + overA.String() + `</td><td>` + overB + `</td></tr>`,
		`<th>warnings about the whole run</th><td>–</td><td>machine has only 2 CPUs; clock &lt;jumped&gt;</td></tr>`} {
		if !strings.Contains(ht, want) {
			t.Errorf("compare HTML lacks %q", want)
		}
	}
	golden(t, "compare.golden.html", normalizeSVG(h.Bytes()))
	golden(t, "compare.golden.txt", txt.Bytes())
}

func TestEscaping(t *testing.T) {
	const evil = `<script>alert("x")</script>`
	ds := smallDataset()
	ds.Run.PlanName = evil
	ds.Run.PlanText = "name: " + evil + "\n"
	ds.Run.Env.Hostname = evil
	for i := range ds.Cells {
		c := &ds.Cells[i]
		if c.Test == "download" {
			c.Scenario = evil + c.Scenario
			c.Factors = []model.Factor{{Name: "size", Value: `<img src=x onerror=alert(1)>`}}
			c.Group = evil + c.Group
			c.Key = evil + c.Key
			c.Unit = `</title><script>`
		}
	}
	for i := range ds.Samples {
		s := &ds.Samples[i]
		if s.Status != model.StatusOK {
			s.Error = evil
		}
		if len(s.Warnings) > 0 {
			s.Warnings = []string{evil}
		}
		for k := range s.Resources {
			s.Resources[k].Name = evil
		}
	}
	out := string(renderHTML(t, ds, goldenOpts()))
	for _, bad := range []string{"<script>", "<img src=x", "</title><script>"} {
		if strings.Contains(out, bad) {
			i := strings.Index(out, bad)
			t.Errorf("unescaped %q: …%s…", bad, out[max(0, i-100):min(len(out), i+100)])
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;"} {
		if !strings.Contains(out, want) {
			t.Errorf("escaped text %q missing", want)
		}
	}
	// inside the SVG charts too (axis labels of the download bars)
	if !strings.Contains(out, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;baseline") {
		t.Error("scenario name not found escaped in a chart")
	}
	var txt bytes.Buffer
	ds.Run.PlanName = "evil\x1b[2J\ttab"
	if err := Text(&txt, ds, goldenOpts()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(txt.String(), "\x1b") {
		t.Error("terminal escape sequence passed through to the text summary")
	}
}

func TestErrors(t *testing.T) {
	if err := HTML(&bytes.Buffer{}, nil, Options{}); err == nil {
		t.Error("nil dataset accepted")
	}
	ds := smallDataset()
	ds.Samples = append(ds.Samples, model.Sample{ID: 99999, CellID: 4242})
	if err := HTML(&bytes.Buffer{}, ds, Options{}); err == nil || !strings.Contains(err.Error(), "unknown cell id 4242") {
		t.Errorf("orphan sample: %v", err)
	}
	if err := HTML(&bytes.Buffer{}, smallDataset(), Options{WaterfallSample: 123456}); err == nil || !strings.Contains(err.Error(), "waterfall sample 123456") {
		t.Errorf("unknown waterfall sample: %v", err)
	}
	broken := errors.New("disk full")
	if err := HTML(failWriter{broken}, smallDataset(), Options{}); !errors.Is(err, broken) {
		t.Errorf("write error not returned: %v", err)
	}
	if err := Text(failWriter{broken}, smallDataset(), Options{}); !errors.Is(err, broken) {
		t.Errorf("text write error not returned: %v", err)
	}
}

func TestChosenWaterfall(t *testing.T) {
	ds := smallDataset()
	var id int64
	for _, s := range ds.Samples {
		if len(s.Resources) > 0 && s.Status == model.StatusOK && !s.Warmup && s.Iteration == 2 {
			id = s.ID
			break
		}
	}
	out := string(renderHTML(t, ds, Options{WaterfallSample: id}))
	if !strings.Contains(out, fmt.Sprintf("Chosen sample %d:", id)) {
		t.Errorf("chosen waterfall of sample %d not drawn", id)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestParallelLine(t *testing.T) {
	serial := &model.Dataset{Samples: []model.Sample{{Concurrency: 1}, {Concurrency: 1}}}
	if got := parallelLine(serial); got != "" {
		t.Errorf("serial run: %q, want no line", got)
	}
	par := &model.Dataset{Samples: []model.Sample{{Slot: 0, Concurrency: 1}, {Slot: 1, Concurrency: 3}, {Slot: 2, Concurrency: 2}}}
	got := parallelLine(par)
	for _, want := range []string{"3 testbeds, up to 3 taking samples at once; 2 of 3 samples ran beside others", "quicbench check-parallel"} {
		if !strings.Contains(got, want) {
			t.Errorf("parallel run: %q lacks %q", got, want)
		}
	}
}
