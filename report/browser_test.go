package report

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/quicbench/quicbench/internal/testsupport"
)

// artifactDir is where the browser test keeps its screenshots: the
// directory in $QUICBENCH_ARTIFACTS, or the system temporary directory.
func artifactDir(t *testing.T) string {
	dir := os.Getenv("QUICBENCH_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "quicbench-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func chromiumPath(t *testing.T) string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	testsupport.Unavailable(t, "chromium is not installed (Debian package chromium): cannot run the browser test")
	return ""
}

type svgInfo struct {
	Width, Height float64
	Paths, Texts  int
}

type pageInfo struct {
	SVGs        []svgInfo
	ChartErrors int
	Resources   int // performance entries of subresources fetched
	Title       string
	ScrollH     float64
}

// TestBrowserRendersReport opens the generated report from disk in headless
// Chromium with networking disabled and checks that every chart rendered
// with a size and drawn content, and that the page requested nothing but
// itself. It keeps full-page screenshots and a PDF print as artifacts.
func TestBrowserRendersReport(t *testing.T) {
	exe := chromiumPath(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	html := renderHTML(t, smallDataset(), goldenOpts())
	if err := os.WriteFile(path, html, 0o644); err != nil {
		t.Fatal(err)
	}
	wantSVGs := bytes.Count(html, []byte("<svg "))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		// no name resolves and every connection goes to a closed port
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND"),
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1366, 900),
	)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()

	var mu sync.Mutex
	var requests []string
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request != nil {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	// offline for every URL pattern, on top of the dead proxy
	if _, err := chromedp.Call(bctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}},
	}); err != nil {
		t.Fatal(err)
	}
	info := openAndInspect(t, bctx, path, wantSVGs)
	if !strings.HasPrefix(info.Title, "quicbench: study-mix") {
		t.Errorf("title %q", info.Title)
	}

	art := artifactDir(t)
	full, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	top, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	pdf, err := chromedp.Run(bctx, chromedp.PrintToPDF(chromedp.PDFPaper(chromedp.PaperA4), chromedp.PDFPrintBackground()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF")) {
		t.Errorf("printing to PDF gave no PDF (%d bytes)", len(pdf))
	}

	// the comparison of two runs, in the same browser
	cpath := filepath.Join(dir, "compare.html")
	var cmp bytes.Buffer
	if err := CompareHTML(&cmp, smallDataset(), secondRun(), Options{Source: "before.db", SourceB: "after.db"},
		RunNotes{Browser: "Chrome/156.0.8078.79"}, RunNotes{Browser: "Chrome/157.0.8100.12"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cpath, cmp.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	openAndInspect(t, bctx, cpath, bytes.Count(cmp.Bytes(), []byte("<svg ")))
	cfull, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		name string
		data []byte
	}{{"report-full.png", full}, {"report-top.png", top}, {"report-print.pdf", pdf}, {"compare-full.png", cfull}} {
		p := filepath.Join(art, a.name)
		if err := os.WriteFile(p, a.data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("artifact: %s (%d bytes)", p, len(a.data))
	}
	mu.Lock()
	for _, u := range requests {
		if !strings.HasPrefix(u, "file://") {
			t.Errorf("the page requested %s", u)
		}
	}
	n := len(requests)
	mu.Unlock()
	if n != 2 {
		t.Errorf("%d requests, want exactly two (the report and the comparison themselves)", n)
	}
	if !bytes.HasPrefix(full, []byte("\x89PNG")) {
		t.Error("full-page screenshot is not a PNG")
	}
	t.Logf("%d charts rendered, page height %.0f px, %d request(s): %v", len(info.SVGs), info.ScrollH, n, requests)
}

// openAndInspect navigates to the file and checks that it shows want charts,
// each rendered with a size and drawn content, and fetched no subresource.
func openAndInspect(t *testing.T, ctx context.Context, path string, want int) pageInfo {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path)); err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	info, err := chromedp.Run(ctx, chromedp.Evaluate[pageInfo](`(() => {
		const svgs = [...document.querySelectorAll('svg')].map(s => {
			const r = s.getBoundingClientRect();
			return {Width: r.width, Height: r.height, Paths: s.querySelectorAll('path').length, Texts: s.querySelectorAll('text').length};
		});
		return {SVGs: svgs, ChartErrors: document.querySelectorAll('.chart-error').length,
			Resources: performance.getEntriesByType('resource').length, Title: document.title,
			ScrollH: document.documentElement.scrollHeight};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.SVGs) != want || want == 0 {
		t.Errorf("%s: browser sees %d <svg> elements, the file has %d", filepath.Base(path), len(info.SVGs), want)
	}
	for i, s := range info.SVGs {
		if s.Width <= 0 || s.Height <= 0 || s.Paths == 0 || s.Texts == 0 {
			t.Errorf("%s: chart %d did not render: %+v", filepath.Base(path), i, s)
		}
		if s.Width > 1366 {
			t.Errorf("%s: chart %d is %.0f px wide, wider than the window", filepath.Base(path), i, s.Width)
		}
	}
	if info.ChartErrors != 0 {
		t.Errorf("%s: %d charts report a drawing error", filepath.Base(path), info.ChartErrors)
	}
	if info.Resources != 0 {
		t.Errorf("%s: the page fetched %d subresources", filepath.Base(path), info.Resources)
	}
	return info
}
