package endpoint

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/model"
)

// testServer starts a server on 127.0.0.1 and returns it with a pool
// trusting its CA.
func testServer(t testing.TB, cfg ServerConfig) (*Server, *x509.CertPool) {
	t.Helper()
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	cfg.Logf = t.Logf
	srv, err := StartServer(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing server: %v", err)
		}
	})
	pool, err := certs.PoolFromPEM([]byte(srv.Info().CAPEM))
	if err != nil {
		t.Fatal(err)
	}
	return srv, pool
}

func specFor(srv *Server, pool *x509.CertPool, proto string, paths ...string) FetchSpec {
	addr := srv.Addr()
	if proto == model.ProtoH1C {
		addr = srv.PlainAddr()
	}
	return FetchSpec{Proto: proto, Addr: addr, Paths: paths, RootCAs: pool, Verify: true}
}

// warmEcho is the spec of repeat /echo requests over proto on a warm
// connection.
func warmEcho(srv *Server, pool *x509.CertPool, proto string, repeat int) FetchSpec {
	spec := specFor(srv, pool, proto, "/echo")
	spec.Warm, spec.Repeat = true, repeat
	return spec
}

// checkResult asserts the invariants every successful result must hold:
// what was negotiated, ordered timestamps, chunk sums.
func checkResult(t *testing.T, res *FetchResult, proto string) {
	t.Helper()
	if len(res.Conns) == 0 {
		t.Fatal("no connections recorded")
	}
	for i, c := range res.Conns {
		n := c.Negotiated
		if n.ALPN != expectedALPN[proto] {
			t.Errorf("conn %d: ALPN %q, want %q", i, n.ALPN, expectedALPN[proto])
		}
		if want := expectedHTTP[proto]; c.Requests > 0 && n.HTTPVersion != want {
			t.Errorf("conn %d: HTTP version %q, want %q", i, n.HTTPVersion, want)
		}
		if proto == model.ProtoH1C {
			if n.TLSVersion != "" || c.Handshake != 0 {
				t.Errorf("conn %d: cleartext connection with TLS %q handshake %d", i, n.TLSVersion, c.Handshake)
			}
		} else {
			if n.TLSVersion != "TLS 1.3" || n.Cipher == "" {
				t.Errorf("conn %d: TLS %q cipher %q", i, n.TLSVersion, n.Cipher)
			}
			if c.Handshake < c.Connected {
				t.Errorf("conn %d: handshake %d before connect %d", i, c.Handshake, c.Connected)
			}
		}
		if model.IsQUIC(proto) != (n.QUICVersion != "") {
			t.Errorf("conn %d: QUIC version %q for %s", i, n.QUICVersion, proto)
		}
		if !(0 < c.Start && c.Start <= c.Connected && c.Connected <= c.Closed) {
			t.Errorf("conn %d: start %d connected %d closed %d out of order", i, c.Start, c.Connected, c.Closed)
		}
		wantKind := "tcp"
		if model.IsQUIC(proto) {
			wantKind = "quic"
		}
		if c.Transport.Kind != wantKind || c.Transport.PacketsSent == 0 || c.Transport.SmoothedRTTms <= 0 {
			t.Errorf("conn %d: transport stats %+v", i, c.Transport)
		}
		if c.Local == "" || strings.HasPrefix(c.Local, "0.0.0.0") {
			t.Errorf("conn %d: local address %q", i, c.Local)
		}
	}
	var total int64
	for i, r := range res.Requests {
		if r.Error != "" {
			t.Errorf("request %d %s: %s", i, r.Path, r.Error)
		}
		if r.Conn < 0 || r.Conn >= len(res.Conns) {
			t.Fatalf("request %d: conn index %d of %d", i, r.Conn, len(res.Conns))
		}
		c := res.Conns[r.Conn]
		if !(r.Start > 0 && r.Sent >= r.Start && r.FirstByte >= r.Sent && r.End >= r.FirstByte) {
			t.Errorf("request %d %s: start %d sent %d first %d end %d out of order", i, r.Path, r.Start, r.Sent, r.FirstByte, r.End)
		}
		if r.Start < c.Connected || r.End > c.Closed {
			t.Errorf("request %d %s: [%d, %d] outside its connection [%d, %d]", i, r.Path, r.Start, r.End, c.Connected, c.Closed)
		}
		if r.Status != 200 {
			t.Errorf("request %d %s: status %d", i, r.Path, r.Status)
		}
		var sum int64
		prev := r.FirstByte
		for j, ch := range r.Chunks {
			if ch.T < prev || ch.Bytes <= 0 {
				t.Fatalf("request %d chunk %d: t %d after %d, %d bytes", i, j, ch.T, prev, ch.Bytes)
			}
			prev = ch.T
			sum += int64(ch.Bytes)
		}
		if sum != r.Bytes {
			t.Errorf("request %d: chunks sum to %d, Bytes %d", i, sum, r.Bytes)
		}
		if len(r.Chunks) > 0 && r.Chunks[len(r.Chunks)-1].T > r.End {
			t.Errorf("request %d: last chunk after End", i)
		}
		total += r.Bytes
	}
	if total != res.Bytes {
		t.Errorf("Bytes %d, requests sum to %d", res.Bytes, total)
	}
	if !(res.MeasureStart <= res.MeasureEnd) {
		t.Errorf("measure [%d, %d]", res.MeasureStart, res.MeasureEnd)
	}
	if res.Negotiated != res.Conns[0].Negotiated {
		t.Errorf("result negotiated %+v differs from first connection's %+v", res.Negotiated, res.Conns[0].Negotiated)
	}
	if res.CPU.ClientUser+res.CPU.ClientSys <= 0 {
		t.Errorf("no client CPU time recorded: %+v", res.CPU)
	}
}

func TestEveryProtocolDownloadEchoUpload(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range model.Protocols {
		t.Run(proto, func(t *testing.T) {
			spec := specFor(srv, pool, proto, "/bytes/300000", "/echo", "/bytes/0")
			res, err := Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			want := []int64{300000, 3, 0}
			for i, r := range res.Requests {
				if r.Bytes != want[i] {
					t.Errorf("%s: %d bytes, want %d", r.Path, r.Bytes, want[i])
				}
			}
			if len(res.Conns) != 1 {
				t.Errorf("%d connections for sequential requests, want 1", len(res.Conns))
			}

			spec = specFor(srv, pool, proto, "/upload")
			spec.Upload = 200000
			res, err = Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			r := res.Requests[0]
			if r.UploadBytes != 200000 || res.UploadBytes != 200000 {
				t.Errorf("upload: sent %d (result %d), want 200000", r.UploadBytes, res.UploadBytes)
			}
			if r.ServerUploadNanos <= 0 {
				t.Errorf("upload: server time %d", r.ServerUploadNanos)
			}
		})
	}
}

func TestStreamSegmentsArriveSeparately(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	const segments, size = 4, 700
	for _, proto := range []string{model.ProtoH1, model.ProtoH1C, model.ProtoH2, model.ProtoH3} {
		t.Run(proto, func(t *testing.T) {
			spec := specFor(srv, pool, proto, fmt.Sprintf("/stream?segments=%d&interval=50ms&size=%d", segments, size))
			res, err := Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			r := res.Requests[0]
			if r.Bytes != segments*size {
				t.Fatalf("%d bytes, want %d", r.Bytes, segments*size)
			}
			// Every segment boundary must be a chunk boundary: each flushed
			// segment arrived as its own read(s).
			boundaries := map[int64]bool{}
			var cum int64
			for _, c := range r.Chunks {
				cum += int64(c.Bytes)
				boundaries[cum] = true
			}
			for k := int64(1); k <= segments; k++ {
				if !boundaries[k*size] {
					t.Errorf("segment %d did not end a read; chunks %+v", k, r.Chunks)
				}
			}
		})
	}
}

func TestPageModeFetchesObjects(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range []string{model.ProtoH1, model.ProtoH1C, model.ProtoH2, model.ProtoH3} {
		t.Run(proto, func(t *testing.T) {
			spec := specFor(srv, pool, proto, "/page/8/2KB")
			spec.Page = true
			spec.Conns = 3
			res, err := Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			if len(res.Requests) != 9 {
				t.Fatalf("%d requests, want the page and 8 objects", len(res.Requests))
			}
			for i, r := range res.Requests[1:] {
				if r.Path != content.ObjectPath("/page/8/2KB", i) || r.Bytes != 2000 {
					t.Errorf("object %d: %s, %d bytes", i, r.Path, r.Bytes)
				}
				if r.Start < res.Requests[0].End {
					t.Errorf("object %d requested before the page arrived", i)
				}
			}
			// HTTP/1.1 opens connections as requests wait for one (at
			// most Conns); how many depends on how fast the first ones
			// finish. The multiplexed protocols use exactly one.
			if multiplexed(proto) && len(res.Conns) != 1 || len(res.Conns) > 3 {
				t.Errorf("%d connections", len(res.Conns))
			}
		})
	}
}

func TestParallelUsesOneConnectionOrUpToConns(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range model.Protocols {
		t.Run(proto, func(t *testing.T) {
			// Each HTTP request lasts at least 100 ms (two stream segments
			// 100 ms apart), so every HTTP/1.1 worker finds one waiting
			// and opens its own connection.
			path, size := "/stream?segments=2&interval=100ms&size=25000", int64(50000)
			if isRaw(proto) {
				path = "/bytes/50000"
			}
			paths := make([]string, 8)
			for i := range paths {
				paths[i] = path
			}
			spec := specFor(srv, pool, proto, paths...)
			spec.Parallel, spec.Conns = 4, 3
			res, err := Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			want := 1
			if !multiplexed(proto) {
				want = 3
			}
			if len(res.Conns) != want && !(proto == model.ProtoTCP && len(res.Conns) <= 3) {
				t.Fatalf("%d connections, want %d", len(res.Conns), want)
			}
			n := 0
			for _, c := range res.Conns {
				n += c.Requests
			}
			if n != 8 || len(res.Requests) != 8 || res.Bytes != 8*size {
				t.Fatalf("%d requests on connections, %d recorded, %d bytes", n, len(res.Requests), res.Bytes)
			}
		})
	}
}

func TestWarmMeasuresOnlyRequests(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range model.Protocols {
		t.Run(proto, func(t *testing.T) {
			spec := warmEcho(srv, pool, proto, 5)
			res, err := Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			if len(res.Conns) != 1 || len(res.Requests) != 5 || res.Conns[0].Requests != 5 {
				t.Fatalf("%d conns, %d requests", len(res.Conns), len(res.Requests))
			}
			c := res.Conns[0]
			if !(c.Connected <= res.MeasureStart) {
				t.Errorf("connection established at %d, measured part started %d", c.Connected, res.MeasureStart)
			}
			for i, r := range res.Requests {
				if r.Start < res.MeasureStart {
					t.Errorf("request %d started at %d before the measured part %d", i, r.Start, res.MeasureStart)
				}
				if i > 0 && r.Start < res.Requests[i-1].End {
					t.Errorf("request %d overlaps its predecessor", i)
				}
			}
		})
	}
}

func TestResumptionAndZeroRTT(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoTCP, model.ProtoH3, model.ProtoQUIC} {
		t.Run(proto+"/resume", func(t *testing.T) {
			spec := specFor(srv, pool, proto, "/bytes/1000")
			spec.Resume = true
			res, err := Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			if !res.Negotiated.Resumed {
				t.Error("connection not resumed")
			}
			if res.Primer == nil || res.Primer.Negotiated.Resumed {
				t.Errorf("primer %+v", res.Primer)
			}
			if res.Primer.Closed > res.MeasureStart {
				t.Errorf("primer closed at %d, after the measured part began (%d)", res.Primer.Closed, res.MeasureStart)
			}
		})
	}
	for _, proto := range []string{model.ProtoH3, model.ProtoQUIC} {
		t.Run(proto+"/0rtt", func(t *testing.T) {
			spec := specFor(srv, pool, proto, "/bytes/1000", "/echo")
			spec.ZeroRTT = true
			res, err := Fetch(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, res, proto)
			if !res.Negotiated.Resumed || !res.Negotiated.ZeroRTT {
				t.Errorf("negotiated %+v, want resumed with 0-RTT", res.Negotiated)
			}
		})
	}
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoTCP, model.ProtoH1C} {
		spec := specFor(srv, pool, proto, "/echo")
		spec.ZeroRTT = true
		if _, err := Fetch(context.Background(), spec); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s with 0-RTT: err = %v, want ErrUnsupported", proto, err)
		}
	}
	spec := specFor(srv, pool, model.ProtoH1C, "/echo")
	spec.Resume = true
	if _, err := Fetch(context.Background(), spec); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("h1c with resumption: err = %v, want ErrUnsupported", err)
	}
}

func TestSitesAndFiles(t *testing.T) {
	site := t.TempDir()
	write := func(dir, name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(site, "index.html", `<!doctype html><html><head>
<link rel="stylesheet" href="css/site.css"><link rel="icon" href="data:,">
<script src="https://cdn.example/x.js"></script><script src="/site/demo/app.js"></script></head>
<body><img src="img/a.png"><img src="img/a.png"></body></html>`)
	write(site, "css/site.css", "body{}")
	write(site, "app.js", "console.log(1)")
	write(site, "img/a.png", strings.Repeat("x", 5000))
	files := t.TempDir()
	write(files, "a.txt", "hello")
	outside := filepath.Join(t.TempDir(), "secret.txt")
	write(filepath.Dir(outside), "secret.txt", "secret")
	if err := os.Symlink(outside, filepath.Join(files, "escape.txt")); err != nil {
		t.Fatal(err)
	}
	srv, pool := testServer(t, ServerConfig{Sites: map[string]string{"demo": site}, FilesDir: files})

	for _, proto := range []string{model.ProtoH2, model.ProtoH3, model.ProtoH1} {
		spec := specFor(srv, pool, proto, "/site/demo/")
		spec.Page, spec.Verify = true, false
		res, err := Fetch(context.Background(), spec)
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		checkResult(t, res, proto)
		var got []string
		for _, r := range res.Requests {
			got = append(got, fmt.Sprintf("%s=%d", r.Path, r.Bytes))
		}
		want := "/site/demo/=" + fmt.Sprint(res.Requests[0].Bytes) + " /site/demo/css/site.css=6 /site/demo/app.js=14 /site/demo/img/a.png=5000"
		if strings.Join(got, " ") != want {
			t.Errorf("%s: requests %v, want %s", proto, got, want)
		}
	}

	spec := specFor(srv, pool, model.ProtoH2, "/files/a.txt")
	spec.Verify = false
	res, err := Fetch(context.Background(), spec)
	if err != nil || res.Bytes != 5 {
		t.Fatalf("/files/a.txt: %v, %d bytes", err, res.Bytes)
	}
	for _, p := range []string{"/files/escape.txt", "/files/../secret.txt", "/files/%2e%2e/secret.txt", "/site/demo/../../secret.txt", "/site/nosuch/index.html"} {
		spec.Paths = []string{p}
		_, err := Fetch(context.Background(), spec)
		var se *StatusError
		if !errors.As(err, &se) {
			t.Errorf("%s: err = %v, want a StatusError", p, err)
		}
	}
}

func TestRawRejectsHTTPOnlyPaths(t *testing.T) {
	for _, p := range []string{"/stream", "/page/1/1KB", "/bytes/abc", "/bytes/2TiB"} {
		_, err := Fetch(context.Background(), FetchSpec{Proto: model.ProtoTCP, Addr: "127.0.0.1:1", Paths: []string{p}})
		if err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err = %v", p, err)
		}
	}
	if _, err := rawRequestFor("/echo", 5); err != nil {
		t.Fatal(err)
	}
	r, _ := rawRequestFor("/bytes/1MiB", 7)
	if r != (raw.Request{Size: 1 << 20, Upload: 7}) {
		t.Fatalf("%+v", r)
	}
}

func TestFetchSpecValidation(t *testing.T) {
	ok := FetchSpec{Proto: model.ProtoH2, Addr: "127.0.0.1:4433", Paths: []string{"/echo"}}
	cases := map[string]func(*FetchSpec){
		"unknown protocol":   func(s *FetchSpec) { s.Proto = "spdy" },
		"host:port":          func(s *FetchSpec) { s.Addr = "127.0.0.1" },
		"no paths":           func(s *FetchSpec) { s.Paths = nil },
		"start with /":       func(s *FetchSpec) { s.Paths = []string{"echo"} },
		"negative":           func(s *FetchSpec) { s.Parallel = -1 },
		"exactly one path":   func(s *FetchSpec) { s.Page = true; s.Paths = []string{"/a", "/b"} },
		"exclude each other": func(s *FetchSpec) { s.Warm = true; s.Resume = true },
		"1 TiB":              func(s *FetchSpec) { s.Upload = 2 << 40 },
	}
	for want, mutate := range cases {
		s := ok
		mutate(&s)
		_, err := Fetch(context.Background(), s)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
	}
}

func TestNotFoundIsStatusError(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoH3} {
		res, err := Fetch(context.Background(), specFor(srv, pool, proto, "/nosuch"))
		var se *StatusError
		if !errors.As(err, &se) || se.Status != 404 {
			t.Fatalf("%s: err = %v", proto, err)
		}
		if len(res.Requests) != 1 || res.Requests[0].Status != 404 || res.Requests[0].Error == "" {
			t.Fatalf("%s: partial result %+v", proto, res.Requests)
		}
	}
}

func TestServerConnStats(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range []string{model.ProtoH2, model.ProtoH3, model.ProtoTCP, model.ProtoQUIC, model.ProtoH1C} {
		res, err := Fetch(context.Background(), specFor(srv, pool, proto, "/bytes/200000"))
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range res.ConnRefs() {
			st, err := srv.ConnStats(context.Background(), ref.Kind, ref.Addr)
			if err != nil {
				t.Fatalf("%s: %v", proto, err)
			}
			if st.Kind != ref.Kind || st.PacketsSent == 0 {
				t.Errorf("%s: server stats %+v", proto, st)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := srv.ConnStats(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("unknown connection: %v", err)
	}
}

func TestStartServerRejectsBadConfig(t *testing.T) {
	cases := map[string]ServerConfig{
		"unknown protocol": {Protocols: []string{"spdy"}},
		"is empty":         {Protocols: []string{}},
		"not an IP":        {Host: "localhost"},
		"0..65535":         {Port: 70000},
		"not a directory":  {FilesDir: "/etc/hostname"},
		"no such file":     {Sites: map[string]string{"a": "/nonexistent-dir"}},
		"letters, digits":  {Sites: map[string]string{"a/b": "/tmp"}},
	}
	for want, cfg := range cases {
		cfg.Host = cmpOr(cfg.Host, "127.0.0.1")
		srv, err := StartServer(context.Background(), cfg)
		if err == nil {
			srv.Close()
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v", want, err)
		}
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestServerPortsAndInfo(t *testing.T) {
	srv, _ := testServer(t, ServerConfig{})
	info := srv.Info()
	if info.Port == 0 || info.PlainPort == 0 || info.Port == info.PlainPort {
		t.Fatalf("ports %d / %d", info.Port, info.PlainPort)
	}
	if len(info.Protocols) != len(model.Protocols) || info.SPKI == "" || !strings.Contains(info.CAPEM, "BEGIN CERTIFICATE") {
		t.Fatalf("info %+v", info)
	}
	// A second server asking for the same port fails with a clear error.
	_, err := StartServer(context.Background(), ServerConfig{Host: "127.0.0.1", Port: info.Port})
	if err == nil || !strings.Contains(err.Error(), "listener") {
		t.Fatalf("port in use: %v", err)
	}
	// A server serving only h3 binds only UDP.
	only, err := StartServer(context.Background(), ServerConfig{Host: "127.0.0.1", Protocols: []string{model.ProtoH3}})
	if err != nil {
		t.Fatal(err)
	}
	defer only.Close()
	if only.Info().PlainPort != 0 || only.tcpLn != nil {
		t.Fatalf("h3-only server listens on TCP: %+v", only.Info())
	}
}
