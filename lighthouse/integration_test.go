package lighthouse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/lighthouse"
	"github.com/quicbench/quicbench/model"
)

// testPage is a tiny page with text, a stylesheet and an image.
const testPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>quicbench lighthouse test</title>
<link rel="stylesheet" href="/style.css">
</head><body>
<h1>quicbench</h1>
<p>Some text for First Contentful Paint, and an image below for Largest Contentful Paint.</p>
<img src="/picture.png" width="640" height="360" alt="a gradient">
</body></html>
`

func testPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 640, 360))
	for y := range 360 {
		for x := range 640 {
			img.Set(x, y, color.RGBA{uint8(x * 255 / 640), uint8(y * 255 / 360), 160, 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestRunChromium runs the real Lighthouse against headless Chromium
// (started with package browser, DevTools on a loopback port) loading an
// HTTP/2 page from a loopback test server.
func TestRunChromium(t *testing.T) {
	inst, err := lighthouse.Find()
	if err != nil {
		testsupport.Unavailable(t, "Lighthouse not installed: %v", err)
	}
	pic := testPNG(t)
	var served = make(chan string, 100)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case served <- r.Proto + " " + r.URL.Path:
		default:
		}
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, testPage)
		case "/style.css":
			w.Header().Set("Content-Type", "text/css")
			fmt.Fprint(w, "body { font-family: sans-serif; margin: 2em; } h1 { color: #234; }\n")
		case "/picture.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(pic)
		default:
			http.NotFound(w, r)
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var chromeLog bytes.Buffer
	s, err := browser.NewSession(ctx, browser.Options{
		Protocol:        model.ProtoH2,
		SPKIHash:        browser.SPKIHash(srv.Certificate()),
		RemoteDebugging: true,
		Output:          &chromeLog,
	})
	if errors.Is(err, browser.ErrNoBrowser) {
		testsupport.Unavailable(t, "no Chromium: %v", err)
	}
	if err != nil {
		t.Logf("Chromium's output:\n%s", chromeLog.String())
		t.Fatalf("starting Chromium: %v", err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing Chromium: %v", err)
		}
	}()
	port, err := s.DevToolsPort()
	if err != nil {
		t.Fatal(err)
	}

	var stderr bytes.Buffer
	start := time.Now()
	rep, err := lighthouse.Run(ctx, inst, lighthouse.Options{URL: srv.URL + "/", Port: port, MaxWaitForLoad: 30 * time.Second, Stderr: &stderr})
	t.Logf("Lighthouse %s with node %s took %v", inst.Version, inst.NodeVersion, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Logf("node's stderr:\n%s", stderr.String())
		t.Logf("Chromium's output:\n%s", chromeLog.String())
		t.Fatalf("Run: %v", err)
	}
	t.Logf("FCP %.1f SI %.1f LCP %.1f TTI %.1f TBT %.1f CLS %.4f | score %.2f study %.4f | load %v DCL %v | %d bytes | warnings %q",
		rep.FCP, rep.SI, rep.LCP, rep.TTI, rep.TBT, rep.CLS, rep.Score, rep.StudyScore, rep.ObservedLoad, rep.ObservedDOMContentLoaded, rep.TotalByteWeight, rep.Warnings)
	for _, q := range rep.Requests {
		t.Logf("  %s %s %d %s %d B %.1f-%.1f ms", q.Protocol, q.ResourceType, q.StatusCode, q.URL, q.TransferSize, q.StartMs, q.EndMs)
	}

	if rep.LighthouseVersion != inst.Version {
		t.Errorf("report of Lighthouse %s, install %s", rep.LighthouseVersion, inst.Version)
	}
	if rep.RequestedURL != srv.URL+"/" || rep.FinalURL != srv.URL+"/" {
		t.Errorf("URLs %q -> %q", rep.RequestedURL, rep.FinalURL)
	}
	if !strings.Contains(rep.UserAgent, "Chrome") {
		t.Errorf("UserAgent %q", rep.UserAgent)
	}
	if err := rep.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	if !(rep.FCP > 0) || !(rep.LCP >= rep.FCP) || !(rep.SI > 0) || !(rep.TTI > 0) {
		t.Errorf("metrics FCP %v LCP %v SI %v TTI %v", rep.FCP, rep.LCP, rep.SI, rep.TTI)
	}
	if rep.Score < 0 || rep.Score > 1 {
		t.Errorf("Score %v not in [0,1]", rep.Score)
	}
	if rep.StudyScore < 0 || rep.StudyScore > 1 || len(rep.MetricScores) != 6 {
		t.Errorf("StudyScore %v from %v", rep.StudyScore, rep.MetricScores)
	}
	if rep.ObservedLoad <= 0 || rep.TotalByteWeight < int64(len(pic)) {
		t.Errorf("load %v, %d bytes (the image alone is %d)", rep.ObservedLoad, rep.TotalByteWeight, len(pic))
	}
	n := 0
	for _, q := range rep.Requests {
		if strings.HasPrefix(q.URL, srv.URL+"/") {
			n++
		}
	}
	p := rep.Protocols(srv.URL)
	if n < 3 || p["h2"] != n || len(p) != 1 {
		t.Errorf("Protocols(%s) = %v for %d requests to it, want all h2 (>= 3: page, stylesheet, image)", srv.URL, p, n)
	}
	for len(served) > 0 {
		if r := <-served; !strings.HasPrefix(r, "HTTP/2.0 ") {
			t.Errorf("server saw %s", r)
		}
	}
}
