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

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
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

// Viewports of the layout checks, and the width of an A4 page's content
// at the report's print margins (210 mm - 2 x 12 mm, at 96 px per inch).
const (
	desktopWidth = 1280
	phoneWidth   = 390
	a4Width      = 703
	firstScreen  = 900
)

type svgInfo struct {
	Width, Height float64
	Shapes, Texts int
}

type pageInfo struct {
	SVGs        []svgInfo
	ChartErrors int
	Resources   int // performance entries of subresources fetched
	Title       string
	ScrollH     float64
}

// layout is what the first screen and the page's width look like.
type layout struct {
	ScrollW, ClientW float64
	AnswerTop        float64 // top of #answer, from the top of the page
	Matrix, Forest   bool    // #answer holds the matrix and the forest plot
	MatrixCells      int
	Wide             []string // elements whose right edge passes the viewport
}

// browser starts headless Chromium with networking disabled and returns
// its context, the URLs the pages requested and the console errors and
// exceptions they raised.
func browser(t *testing.T) (context.Context, func() []string, func() []string) {
	exe := chromiumPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	t.Cleanup(cancel)
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
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)

	var mu sync.Mutex
	var requests, problems []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			if e.Request != nil {
				requests = append(requests, e.Request.URL)
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, strings.Trim(string(a.Value), `"`))
				}
				problems = append(problems, "console."+string(e.Type)+": "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			if e.ExceptionDetails != nil {
				problems = append(problems, "exception: "+e.ExceptionDetails.Text)
			}
		case *cdplog.EventEntryAdded:
			if e.Entry != nil && e.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, "log: "+e.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	// offline for every URL pattern, on top of the dead proxy
	if _, err := chromedp.Call(bctx, network.EmulateNetworkConditionsByRule, network.EmulateNetworkConditionsByRuleParams{
		MatchedNetworkConditions: []*network.Conditions{{Offline: true, DownloadThroughput: -1, UploadThroughput: -1}},
	}); err != nil {
		t.Fatal(err)
	}
	snapshot := func(s *[]string) func() []string {
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), *s...)
		}
	}
	return bctx, snapshot(&requests), snapshot(&problems)
}

// TestBrowserRendersReport opens generated reports from disk in headless
// Chromium with networking disabled. For each: no console error or
// exception; the first screen (#answer) starts within the first 900 px and
// holds the verdict matrix, with one cell per group of protocol
// comparisons, and the forest plot; the page is never wider than the
// viewport at 1280 px or on a 390 px phone, folded or unfolded; every chart
// renders with a size and drawn content; laid out for print at an A4
// page's width, nothing passes the page's edge; printing to PDF gives a
// PDF; nothing but the file itself is requested. It keeps the first
// screen, full-page screenshots and the PDF as artifacts.
func TestBrowserRendersReport(t *testing.T) {
	bctx, requests, problems := browser(t)
	dir := t.TempDir()
	art := artifactDir(t)
	for _, r := range []struct {
		name string
		ds   *model.Dataset
		opts Options
	}{{"report", smallDataset(), goldenOpts()}, {"implementations", clientsDataset(), goldenOpts()},
		// long verdicts: a failure note and the variant with failures ranked worst
		{"failures", failuresDataset(), Options{Stats: stats.Config{MinEffect: -1}}}} {
		path := filepath.Join(dir, r.name+".html")
		html := renderHTML(t, r.ds, r.opts)
		if err := os.WriteFile(path, html, 0o644); err != nil {
			t.Fatal(err)
		}
		checkReportInBrowser(t, bctx, path, r.ds, r.opts, html, art)
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
	setViewport(t, bctx, desktopWidth, firstScreen)
	openAndInspect(t, bctx, cpath, bytes.Count(cmp.Bytes(), []byte("<svg ")))
	checkWidth(t, "comparison of two runs at 1280 px", measureLayout(t, bctx))
	cfull, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, art, "compare-full.png", cfull)

	if p := problems(); len(p) > 0 {
		t.Errorf("console errors or exceptions: %q", p)
	}
	// the listener hears errors: one raised on purpose is caught
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[any](`console.error("probe of the console listener")`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(problems()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := problems(); len(p) != 1 || !strings.Contains(p[0], "probe of the console listener") {
		t.Errorf("the console listener missed an error raised on purpose: %q", p)
	}
	reqs := requests()
	for _, u := range reqs {
		if !strings.HasPrefix(u, "file://") {
			t.Errorf("the page requested %s", u)
		}
	}
}

// checkReportInBrowser runs the checks of TestBrowserRendersReport on one
// report file.
func checkReportInBrowser(t *testing.T, ctx context.Context, path string, ds *model.Dataset, opts Options, html []byte, art string) {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(path), ".html")
	an, err := stats.Analyze(ds, opts.withDefaults(ds).Stats)
	if err != nil {
		t.Fatal(err)
	}
	groups := 0 // (scenario, test, client, ...) groups with a protocol comparison
	for _, g := range an.Groups {
		if len(g.Comparisons) > 0 {
			groups++
		}
	}

	// desktop: the first screen
	setViewport(t, ctx, desktopWidth, firstScreen)
	openAndInspect(t, ctx, path, 0)
	l := measureLayout(t, ctx)
	if !(l.AnswerTop >= 0 && l.AnswerTop < firstScreen) || !l.Matrix || !l.Forest {
		t.Errorf("%s: #answer at %.0f px (want within the first %d), matrix %v, forest plot %v", name, l.AnswerTop, firstScreen, l.Matrix, l.Forest)
	}
	if l.MatrixCells != groups || groups == 0 {
		t.Errorf("%s: %d matrix cells for %d groups of comparisons", name, l.MatrixCells, groups)
	}
	checkWidth(t, name+" at 1280 px", l)
	top, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, art, name+"-first-screen.png", top)

	// every fold opened: every chart drawn, and still no wider than the page
	unfold(t, ctx)
	info := openAndInspect(t, ctx, "", bytes.Count(html, []byte("<svg ")))
	checkWidth(t, name+" at 1280 px, unfolded", measureLayout(t, ctx))
	full, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	writeArtifact(t, art, name+"-full.png", full)

	// a phone
	setViewport(t, ctx, phoneWidth, 844)
	checkWidth(t, name+" at 390 px, unfolded", measureLayout(t, ctx))
	openAndInspect(t, ctx, path, 0)
	checkWidth(t, name+" at 390 px", measureLayout(t, ctx))

	// printed on A4: laid out at the page's width for print, nothing
	// passes its edge; then the PDF itself
	setViewport(t, ctx, a4Width, 1000)
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"}); err != nil {
		t.Fatal(err)
	}
	checkWidth(t, name+" laid out for print on A4", measureLayout(t, ctx))
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
		t.Fatal(err)
	}
	setViewport(t, ctx, desktopWidth, firstScreen)
	pdf, err := chromedp.Run(ctx, chromedp.PrintToPDF(chromedp.PDFPaper(chromedp.PaperA4), chromedp.PDFPrintBackground()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF")) || bytes.Count(pdf, []byte("/Type /Page")) < 2 {
		t.Errorf("%s: printing to PDF gave no PDF of several pages (%d bytes)", name, len(pdf))
	}
	writeArtifact(t, art, name+"-print.pdf", pdf)
	t.Logf("%s: %d charts rendered, page height %.0f px at 1280 px (folds open), #answer at %.0f px, %d matrix cells",
		name, len(info.SVGs), info.ScrollH, l.AnswerTop, l.MatrixCells)
}

func setViewport(t *testing.T, ctx context.Context, w, h int64) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, h)); err != nil {
		t.Fatal(err)
	}
}

// unfold opens every <details> of the page.
func unfold(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const d = document.querySelectorAll('details'); d.forEach(x => x.open = true); return d.length; })()`)); err != nil {
		t.Fatal(err)
	}
}

// measureLayout reads the page's width, where #answer is and what it holds,
// and the elements (outside horizontally scrolling boxes) that pass the
// viewport's right edge.
func measureLayout(t *testing.T, ctx context.Context) layout {
	t.Helper()
	l, err := chromedp.Run(ctx, chromedp.Evaluate[layout](`(() => {
		const de = document.documentElement, a = document.getElementById('answer');
		const inScroller = e => { for (let p = e.parentElement; p; p = p.parentElement) { const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll' || o === 'hidden') return true; } return false; };
		const wide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > de.clientWidth + 1 && e.checkVisibility() && !inScroller(e))
			.slice(0, 8).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + ' "' + (e.textContent || '').trim().slice(0, 40) + '" right ' + Math.round(e.getBoundingClientRect().right));
		return {ScrollW: de.scrollWidth, ClientW: de.clientWidth,
			AnswerTop: a ? a.getBoundingClientRect().top + window.scrollY : -1,
			Matrix: !!(a && a.querySelector('svg.matrix')), Forest: !!(a && a.querySelector('svg.forest')),
			MatrixCells: a ? a.querySelectorAll('svg.matrix g.mcell').length : 0, Wide: wide};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func checkWidth(t *testing.T, what string, l layout) {
	t.Helper()
	if l.ScrollW > l.ClientW || len(l.Wide) > 0 {
		t.Errorf("%s: the page is %.0f px wide in a %.0f px viewport; past the edge: %q", what, l.ScrollW, l.ClientW, l.Wide)
	}
}

func writeArtifact(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("artifact: %s (%d bytes)", p, len(data))
}

// openAndInspect navigates to the file (path "" inspects the page as it
// is) and checks that it shows want charts (0: any number), each rendered
// with a size and drawn content, and fetched no subresource.
func openAndInspect(t *testing.T, ctx context.Context, path string, want int) pageInfo {
	t.Helper()
	what := "the page"
	if path != "" {
		what = filepath.Base(path)
		if err := chromedp.Do(ctx, chromedp.Navigate("file://"+path)); err != nil {
			t.Fatalf("opening %s: %v", path, err)
		}
	}
	info, err := chromedp.Run(ctx, chromedp.Evaluate[pageInfo](`(() => {
		const svgs = [...document.querySelectorAll('svg')].map(s => {
			const r = s.getBoundingClientRect();
			return {Width: r.width, Height: r.height, Shapes: s.querySelectorAll('path, rect, line, circle, polygon, polyline').length, Texts: s.querySelectorAll('text').length};
		});
		return {SVGs: svgs, ChartErrors: document.querySelectorAll('.chart-error').length,
			Resources: performance.getEntriesByType('resource').length, Title: document.title,
			ScrollH: document.documentElement.scrollHeight};
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if want > 0 && len(info.SVGs) != want {
		t.Errorf("%s: browser sees %d <svg> elements, the file has %d", what, len(info.SVGs), want)
	}
	if want > 0 {
		for i, s := range info.SVGs {
			if s.Width <= 0 || s.Height <= 0 || s.Shapes == 0 || s.Texts == 0 {
				t.Errorf("%s: chart %d did not render: %+v", what, i, s)
			}
		}
	}
	if info.ChartErrors != 0 {
		t.Errorf("%s: %d charts report a drawing error", what, info.ChartErrors)
	}
	if info.Resources != 0 {
		t.Errorf("%s: the page fetched %d subresources", what, info.Resources)
	}
	if !strings.HasPrefix(info.Title, "quicbench") || !strings.Contains(info.Title, "study-mix") {
		t.Errorf("%s: title %q", what, info.Title)
	}
	return info
}
