package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
)

const testObjects = 10

// requireChromium skips the test when no Chromium binary is installed.
func requireChromium(t testing.TB) {
	t.Helper()
	if _, err := findExe(""); err != nil {
		testsupport.Unavailable(t, "chromium is not installed (%v): skipping the real-browser test", err)
	}
}

// profileParent returns a fresh parent directory for profiles and, at the
// end of the test, checks that no profile and no Chromium process of it is
// left.
func profileParent(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { assertClean(t, dir) })
	return dir
}

// assertClean fails when a profile directory is left in parent, a live
// process has parent in its command line, or a goroutine of the driver
// (chromedp or this package) still runs.
func assertClean(t *testing.T, parent string) {
	t.Helper()
	// chromedp's reader goroutines may need a moment to see their pipes
	// closed (bounded wait).
	left := driverGoroutines()
	for deadline := time.Now().Add(5 * time.Second); len(left) > 0 && time.Now().Before(deadline); left = driverGoroutines() {
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("%d driver goroutines left:\n%s", len(left), strings.Join(left, "\n\n"))
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatalf("reading %s: %v", parent, err)
	}
	for _, e := range entries {
		t.Errorf("profile directory %s left behind in %s", e.Name(), parent)
	}
	if pids := processesMentioning(parent); len(pids) > 0 {
		t.Errorf("processes %v still run with a profile under %s", pids, parent)
	}
}

// processesMentioning lists live processes whose command line contains s.
func processesMentioning(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.state == 'Z' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// checkOrdered asserts the ordering every load must satisfy.
func checkOrdered(t *testing.T, r *Result) {
	t.Helper()
	if !(r.TTFB > 0 && r.TTFB <= r.DOMContentLoaded && r.DOMContentLoaded <= r.Load) {
		t.Errorf("navigation timing out of order: TTFB %v, DCL %v, load %v", r.TTFB, r.DOMContentLoaded, r.Load)
	}
	if r.FCP <= 0 || r.LCP < r.FCP {
		t.Errorf("paint timing: FCP %v, LCP %v; want 0 < FCP <= LCP", r.FCP, r.LCP)
	}
	for _, res := range r.Resources {
		if !(res.Start >= 0 && res.Start <= res.TTFB && res.TTFB <= res.End && res.End <= int64(r.Load)) {
			t.Errorf("%s: start %d, ttfb %d, end %d, load %d ns: out of order", res.Name, res.Start, res.TTFB, res.End, r.Load)
		}
	}
	if doc := r.Resources[0]; doc.Name != "/" || doc.Start != 0 || doc.TTFB != int64(r.TTFB) {
		t.Errorf("document entry %+v: want name /, start 0, TTFB %d", doc, r.TTFB)
	}
}

func TestLoadEveryProtocol(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: testObjects, altSvc: true})
	cases := []struct {
		proto, alpn, serverProto string
		url                      string
		maxConns                 int // connections that may carry the requests
	}{
		// HTTP/1.1 over TLS and in cleartext: Chromium's pool of up to 6
		// connections per origin; the server offers h2 too but
		// --disable-http2 keeps Chromium on HTTP/1.1.
		{model.ProtoH1, "http/1.1", "HTTP/1.1", srv.url("/"), 6},
		{model.ProtoH1C, "http/1.1", "HTTP/1.1", srv.plainURL("/"), 6},
		// The server announces h3 in Alt-Svc; --disable-quic keeps h2.
		{model.ProtoH2, "h2", "HTTP/2.0", srv.url("/"), 1},
		{model.ProtoH3, "h3", "HTTP/3.0", srv.url("/"), 1},
	}
	for _, c := range cases {
		t.Run(c.proto, func(t *testing.T) {
			before := srv.requests(c.serverProto)
			_, _, usedBefore := srv.conns()
			res, err := Load(context.Background(), Options{
				URL: c.url, Protocol: c.proto, SPKIHash: srv.spki,
				ProfileDir: profileParent(t), Timeout: 20 * time.Second,
			})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if len(res.Resources) != testObjects+1 {
				t.Fatalf("%d resources, want %d: %+v", len(res.Resources), testObjects+1, res.Resources)
			}
			for _, r := range res.Resources {
				if r.Protocol != c.alpn {
					t.Errorf("%s used %q, want %q", r.Name, r.Protocol, c.alpn)
				}
				if r.Bytes <= 0 {
					t.Errorf("%s: %d bytes", r.Name, r.Bytes)
				}
			}
			// The server's view must agree with the browser's.
			if got := srv.requests(c.serverProto) - before; got != testObjects+1 {
				t.Errorf("server saw %d %s requests, want %d", got, c.serverProto, testObjects+1)
			}
			_, _, used := srv.conns()
			if n := used - usedBefore; n < 1 || n > c.maxConns {
				t.Errorf("requests came over %d connections, want 1..%d", n, c.maxConns)
			} else {
				t.Logf("%s: %d connections carried the %d requests", c.proto, n, testObjects+1)
			}
			if res.Negotiated.ALPN != c.alpn || res.Negotiated.HTTPVersion != c.serverProto {
				t.Errorf("negotiated %+v, want ALPN %s / %s", res.Negotiated, c.alpn, c.serverProto)
			}
			if !strings.Contains(res.Version, "Chrome/") {
				t.Errorf("version %q does not name Chrome", res.Version)
			}
			if res.BodyBytes <= 0 || res.TransferBytes < res.BodyBytes || res.CachedResources != 0 {
				t.Errorf("bytes: body %d, transfer %d, cached resources %d", res.BodyBytes, res.TransferBytes, res.CachedResources)
			}
			checkOrdered(t, res)
			m := res.Metrics()
			if m["resources"] != testObjects+1 || m["load_ms"] <= 0 {
				t.Errorf("metrics %v", m)
			}
		})
	}
}

func TestAltSvcDiscovery(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: testObjects, altSvc: true})
	ctx := context.Background()
	s, err := NewSession(ctx, Options{
		URL: srv.url("/"), Protocol: model.ProtoH3, AltSvcDiscovery: true,
		SPKIHash: srv.spki, ProfileDir: profileParent(t), DisableCache: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	// Load 1: the document comes over TCP, Alt-Svc announces h3.
	res, err := s.Load(ctx, srv.url("/"))
	var mm *ProtocolMismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("first load: err %v, want *ProtocolMismatchError", err)
	}
	if res == nil || len(res.Resources) != testObjects+1 {
		t.Fatalf("first load: result %+v, want %d resources with the error", res, testObjects+1)
	}
	if res.Resources[0].Protocol != "h2" || mm.Mismatches[0].Name != "/" || mm.Mismatches[0].Got != "h2" {
		t.Errorf("first load: document used %q (mismatches %+v), want h2", res.Resources[0].Protocol, mm.Mismatches)
	}
	if mm.Want != "h3" || mm.Total != testObjects+1 {
		t.Errorf("mismatch error %+v", mm)
	}

	// Load 2: the same profile knows the Alt-Svc: everything over h3.
	res, err = s.Load(ctx, srv.url("/"))
	if err != nil {
		t.Fatalf("second load: %v", err)
	}
	for _, r := range res.Resources {
		if r.Protocol != "h3" {
			t.Errorf("second load: %s used %q", r.Name, r.Protocol)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestProtocolMismatch(t *testing.T) {
	requireChromium(t)
	// No Alt-Svc and QUIC not forced for this origin: Chromium stays on h2
	// although h3 was asked for.
	srv := newTestServer(t, serverConfig{objects: testObjects, altSvc: false})
	res, err := Load(context.Background(), Options{
		URL: srv.url("/"), Protocol: model.ProtoH3, AltSvcDiscovery: true,
		SPKIHash: srv.spki, ProfileDir: profileParent(t),
	})
	var mm *ProtocolMismatchError
	if !errors.As(err, &mm) {
		t.Fatalf("err %v, want *ProtocolMismatchError", err)
	}
	if len(mm.Mismatches) != testObjects+1 {
		t.Errorf("%d mismatches, want all %d: %v", len(mm.Mismatches), testObjects+1, err)
	}
	for _, m := range mm.Mismatches {
		if m.Got != "h2" {
			t.Errorf("%s used %q, want h2", m.Name, m.Got)
		}
	}
	if res == nil || len(res.Resources) != testObjects+1 {
		t.Errorf("the result must come with the error: %+v", res)
	}
	if !strings.Contains(err.Error(), "/ used h2") {
		t.Errorf("error %q does not name the document", err)
	}
}

func TestWarmSession(t *testing.T) {
	requireChromium(t)
	cases := []struct {
		proto        string
		disableCache bool
	}{
		{model.ProtoH2, true},
		{model.ProtoH3, true},
		{model.ProtoH3, false}, // images are cacheable (max-age): the second load takes them from the cache
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/nocache=%v", c.proto, c.disableCache), func(t *testing.T) {
			srv := newTestServer(t, serverConfig{objects: testObjects, altSvc: true})
			ctx := context.Background()
			s, err := NewSession(ctx, Options{
				URL: srv.url("/"), Protocol: c.proto, SPKIHash: srv.spki,
				ProfileDir: profileParent(t), DisableCache: c.disableCache,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if !strings.Contains(s.Version(), "Chrome/") {
				t.Errorf("version %q", s.Version())
			}
			var second *Result
			for i := range 2 {
				res, err := s.Load(ctx, srv.url("/"))
				if err != nil {
					t.Fatalf("load %d: %v", i, err)
				}
				if len(res.Resources) != testObjects+1 {
					t.Errorf("load %d: %d resources", i, len(res.Resources))
				}
				second = res
			}
			if !second.ConnectionReused {
				t.Error("second load: the document did not reuse the connection")
			}
			// Chromium may open a spare (preconnect) TCP connection, but
			// every request of both loads must use one connection.
			tcp, quic, used := srv.conns()
			if used != 1 {
				t.Errorf("requests of two loads came over %d connections, want 1", used)
			}
			if c.proto == model.ProtoH2 && (tcp == 0 || quic != 0) {
				t.Errorf("h2: %d TCP and %d QUIC connections", tcp, quic)
			}
			if c.proto == model.ProtoH3 && (tcp != 0 || quic != 1) {
				t.Errorf("h3: %d TCP and %d QUIC connections for two loads, want 0 and 1", tcp, quic)
			}
			serverProto := map[string]string{model.ProtoH2: "HTTP/2.0", model.ProtoH3: "HTTP/3.0"}[c.proto]
			wantRequests, wantCached := 2*(testObjects+1), 0
			if !c.disableCache {
				wantRequests, wantCached = testObjects+2, testObjects
			}
			if got := srv.requests(serverProto); got != wantRequests {
				t.Errorf("server saw %d requests for two loads, want %d", got, wantRequests)
			}
			if second.CachedResources != wantCached {
				t.Errorf("second load: %d resources from the cache, want %d", second.CachedResources, wantCached)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Load(ctx, srv.url("/")); err == nil {
				t.Error("Load on a closed session succeeded")
			}
		})
	}
}

func TestHungPageTimesOut(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: 0})
	parent := profileParent(t)
	res, err := Load(context.Background(), Options{
		URL: srv.url("/hang"), Protocol: model.ProtoH2, SPKIHash: srv.spki,
		ProfileDir: parent, Timeout: 1500 * time.Millisecond,
	})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Phase != "load" || te.After != 1500*time.Millisecond {
		t.Fatalf("err %v, want *TimeoutError for the load phase", err)
	}
	if res != nil {
		t.Errorf("a timed-out load returned a result: %+v", res)
	}
	select {
	case <-srv.hanging:
	default:
		t.Error("the hung request never reached the server")
	}
	assertClean(t, parent) // checked now, not only at cleanup
}

func TestLoadCanceled(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: 0})
	parent := profileParent(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-srv.hanging
		cancel()
	}()
	_, err := Load(ctx, Options{
		URL: srv.url("/hang"), Protocol: model.ProtoH3, SPKIHash: srv.spki,
		ProfileDir: parent, Timeout: 20 * time.Second,
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	assertClean(t, parent)
}

func TestNavigationError(t *testing.T) {
	requireChromium(t)
	// A port that nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = Load(context.Background(), Options{
		URL: "https://" + addr + "/", Protocol: model.ProtoH2, ProfileDir: profileParent(t),
	})
	var ne *NavigationError
	if !errors.As(err, &ne) || ne.ErrorText != "net::ERR_CONNECTION_REFUSED" {
		t.Fatalf("err %v, want *NavigationError with net::ERR_CONNECTION_REFUSED", err)
	}
}

func TestStartTimeout(t *testing.T) {
	// A fake "browser" that never answers on the DevTools pipe and leaves
	// a child behind: both must be gone after the start timeout.
	parent := profileParent(t)
	bin := t.TempDir()
	exe := filepath.Join(bin, "fake-chromium")
	pidFile := filepath.Join(bin, "child.pid")
	script := "#!/bin/sh\nsleep 60 &\necho $! > " + pidFile + "\nexec sleep 60\n"
	if err := os.WriteFile(exe, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := NewSession(context.Background(), Options{
		Protocol: model.ProtoH2, Exe: exe, ProfileDir: parent, StartTimeout: 300 * time.Millisecond,
	})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Phase != "start" {
		t.Fatalf("err %v, want *TimeoutError for the start phase", err)
	}
	pid := testsupport.ReadPID(t, pidFile, "the fake browser did not start")
	if st, ok := readStat(pid); ok && st.state != 'Z' {
		t.Errorf("child %d of the fake browser still runs (state %c)", pid, st.state)
	}
	assertClean(t, parent)
}

// driverGoroutines returns the stacks of goroutines running chromedp or
// this package's non-test code (the test servers' goroutines do not count:
// a QUIC server keeps a killed client's connection until its idle timeout).
func driverGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/chromedp/") ||
			(strings.Contains(g, "quicbench/browser.") && !strings.Contains(g, "_test.go")) {
			out = append(out, g)
		}
	}
	return out
}

// TestRemoteDebuggingPort checks that a session started with
// RemoteDebugging serves DevTools on the port DevToolsPort returns (its
// /json/version names the same browser), still loads pages through the
// driver, and that the port is gone once the session is closed.
func TestRemoteDebuggingPort(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: 2})
	ctx := context.Background()
	s, err := NewSession(ctx, Options{Protocol: model.ProtoH2, SPKIHash: srv.spki, ProfileDir: profileParent(t),
		RemoteDebugging: true, DisableFeatures: []string{"RenderDocument"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	port, err := s.DevToolsPort()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/json/version", port))
	if err != nil {
		t.Fatalf("DevTools port %d: %v", port, err)
	}
	var v struct{ Browser string }
	err = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if err != nil || v.Browser == "" || !strings.HasSuffix(s.Version(), strings.TrimPrefix(v.Browser, "HeadlessChrome")) {
		t.Errorf("/json/version browser %q (err %v), session version %q", v.Browser, err, s.Version())
	}
	if _, err := s.Load(ctx, srv.url("/")); err != nil {
		t.Fatalf("load through the WebSocket driver: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
		c.Close()
		t.Errorf("DevTools port %d still open after Close", port)
	}
	if _, err := s.DevToolsPort(); err == nil {
		t.Error("DevToolsPort on a closed session succeeded")
	}
}

// TestStartFailsFast checks that a browser that exits at once makes
// NewSession return its error promptly (it once waited a second time for
// the start that had already reported, and hung).
func TestStartFailsFast(t *testing.T) {
	parent := profileParent(t)
	exe := filepath.Join(t.TempDir(), "fake-chromium")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		s, err := NewSession(context.Background(), Options{Protocol: model.ProtoH2, Exe: exe, ProfileDir: parent, StartTimeout: time.Minute})
		if s != nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		var te *TimeoutError
		if err == nil || errors.As(err, &te) {
			t.Errorf("err %v, want the start's own error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("NewSession still blocked 30 s after the browser exited (start timeout 1 min)")
	}
}
