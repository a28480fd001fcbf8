package replay

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/sites"
)

func testPage(t testing.TB, s sites.PageShape) *har.HAR {
	t.Helper()
	h, err := sites.BuildPage(s)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func decode(t testing.TB, enc string, b []byte) []byte {
	t.Helper()
	var r io.Reader
	switch enc {
	case "":
		return b
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case "br":
		r = brotli.NewReader(bytes.NewReader(b))
	case "zstd":
		zr, err := zstd.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	default:
		t.Fatalf("coding %q", enc)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("%s: %v", enc, err)
	}
	return out
}

// serveAll serves archive a through one handler per group behind an
// httptest server that routes by the request's host, and returns a client
// function.
func newTestOrigins(t *testing.T, archives ...*Archive) (*Origins, func(method, rawURL, acceptEncoding string, hdr ...string) *http.Response) {
	t.Helper()
	l, err := NewLayout(archives...)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Assign(netip.MustParseAddr("10.9.2.2")); err != nil {
		t.Fatal(err)
	}
	o, err := NewOrigins(l, archives)
	if err != nil {
		t.Fatal(err)
	}
	handlers := map[string]http.Handler{}
	for i, g := range l.Groups {
		for _, h := range g.Hosts {
			handlers[h] = o.Handler(i)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := handlers[strings.ToLower(r.Host)]
		if h == nil {
			h = o.Handler(0)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return o, func(method, rawURL, ae string, hdr ...string) *http.Response {
		u, _ := url.Parse(rawURL)
		req, _ := http.NewRequest(method, srv.URL+u.RequestURI(), nil)
		req.Host = u.Host
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
}

func TestServeEveryEntry(t *testing.T) {
	h := testPage(t, sites.PageShape{Name: "p", Origins: 6, Requests: 40, Bytes: 400_000, SharedIPs: 1, Seed: 1})
	a, err := Prepare("p", h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, get := newTestOrigins(t, a)
	if err := o.Begin("p", "h1"); err != nil {
		t.Fatal(err)
	}
	codings := map[string]int{}
	for _, e := range h.Log.Entries {
		want, _ := e.Response.Content.Body()
		resp := get("GET", e.Request.URL, "gzip, deflate, br, zstd")
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		enc := resp.Header.Get("Content-Encoding")
		recorded, _ := har.Header(e.Response.Headers, "content-encoding")
		if enc != recorded {
			t.Errorf("%s: served with coding %q, recorded %q", e.Request.URL, enc, recorded)
		}
		codings[enc]++
		if resp.Header.Get("Content-Length") != "" && resp.ContentLength != int64(len(got)) {
			t.Errorf("%s: Content-Length %d, body %d", e.Request.URL, resp.ContentLength, len(got))
		}
		if d := decode(t, enc, got); !bytes.Equal(d, want) {
			t.Errorf("%s: body differs (%d bytes, want %d)", e.Request.URL, len(d), len(want))
		}
		if resp.Header.Get("Timing-Allow-Origin") != "*" {
			t.Errorf("%s: no Timing-Allow-Origin", e.Request.URL)
		}
	}
	if codings["gzip"] == 0 || codings["br"] == 0 || codings[""] == 0 {
		t.Errorf("codings served %v: want gzip, br and none", codings)
	}
	st := o.End()
	if st.Requests != len(h.Log.Entries) || st.Unmatched != 0 || st.Misrouted != 0 || st.WrongProtocol != 0 {
		t.Fatalf("stats %+v", st)
	}
	if len(st.Origins) != 6 {
		t.Fatalf("%d origins contacted, want 6", len(st.Origins))
	}
	// End starts counting anew.
	if st2 := o.End(); st2.Requests != 0 || len(st2.Origins) != 0 {
		t.Fatalf("second End: %+v", st2)
	}
}

func TestServeCodingNegotiation(t *testing.T) {
	h := testPage(t, sites.PageShape{Name: "p", Origins: 2, Requests: 12, Bytes: 100_000, Seed: 2})
	a, err := Prepare("p", h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, get := newTestOrigins(t, a)
	var brURL string
	var brBody []byte
	for _, e := range h.Log.Entries {
		if v, _ := har.Header(e.Response.Headers, "content-encoding"); v == "br" {
			brURL = e.Request.URL
			brBody, _ = e.Response.Content.Body()
			break
		}
	}
	for _, c := range []struct{ accept, want string }{
		{"gzip, br", "br"}, {"gzip", "gzip"}, {"br;q=0, gzip", "gzip"}, {"identity", ""}, {"", ""}, {"*", "br"},
	} {
		resp := get("GET", brURL, c.accept)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if enc := resp.Header.Get("Content-Encoding"); enc != c.want {
			t.Errorf("Accept-Encoding %q: coding %q, want %q", c.accept, enc, c.want)
			continue
		}
		if !bytes.Equal(decode(t, c.want, got), brBody) {
			t.Errorf("Accept-Encoding %q: body differs", c.accept)
		}
	}
}

func TestMatching(t *testing.T) {
	mk := func(u, body string) har.Entry {
		e := har.Entry{Request: har.Request{Method: "GET", URL: u}, Response: har.Response{Status: 200, Headers: []har.NameValue{{Name: "Content-Type", Value: "text/plain"}}}}
		e.Response.Content.SetBody([]byte(body))
		return e
	}
	h := &har.HAR{Log: har.Log{Version: "1.2", Entries: []har.Entry{
		mk("https://a.example/", "doc"),
		mk("https://a.example/api?x=1&y=2&z=3", "xyz"),
		mk("https://a.example/api?x=1&y=9", "x-only"),
		mk("https://a.example/poll", "first"),
		mk("https://a.example/poll", "second"),
	}}}
	for i := range h.Log.Entries {
		h.Log.Entries[i].StartedDateTime = har.Time(testTime.Add(timeStep * durationOf(i)))
	}
	a, err := Prepare("m", h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, get := newTestOrigins(t, a)
	body := func(u string) (int, string) {
		resp := get("GET", u, "")
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		url, want string
		status    int
	}{
		{"https://a.example/api?x=1&y=2&z=3", "xyz", 200},      // exact
		{"https://a.example/api?z=3&x=1&y=2", "xyz", 200},      // same parameters, other order
		{"https://a.example/api?x=1&y=2&cb=123", "xyz", 200},   // best query match
		{"https://a.example/api?x=1&y=9&cb=5", "x-only", 200},  // best query match
		{"https://a.example/poll", "first", 200},               // recorded twice: in order
		{"https://a.example/poll", "second", 200},              //
		{"https://a.example/poll", "second", 200},              // then the last again
		{"https://a.example/nothing", "", http.StatusNotFound}, // counted
		{"https://other.example/", "", http.StatusNotFound},    // unknown host
	} {
		st, b := body(c.url)
		if st != c.status || (c.want != "" && b != c.want) {
			t.Errorf("%s: %d %q, want %d %q", c.url, st, b, c.status, c.want)
		}
	}
	s := o.End()
	if s.Unmatched != 2 || s.Requests != 7 || len(s.UnmatchedURLs) != 2 {
		t.Fatalf("stats %+v: want 7 answered, 2 unmatched", s)
	}
	if s.Misrouted != 1 { // other.example has no address
		t.Fatalf("misrouted %d, want 1", s.Misrouted)
	}
}

func TestMissingBodies(t *testing.T) {
	h := testPage(t, sites.PageShape{Name: "p", Origins: 3, Requests: 20, Bytes: 200_000, Missing: 2, Seed: 4})
	_, err := Prepare("p", h, Options{})
	var me *MissingError
	if !errors.As(err, &me) || me.Entries != 2 || me.Bytes <= 0 {
		t.Fatalf("refuse: %v", err)
	}
	if !strings.Contains(err.Error(), "missing_bodies: fill") {
		t.Errorf("the refusal does not say how to fill: %v", err)
	}
	a, err := Prepare("p", h, Options{Missing: MissingFill})
	if err != nil {
		t.Fatal(err)
	}
	if a.Filled != 2 {
		t.Fatalf("filled %d, want 2", a.Filled)
	}
	o, get := newTestOrigins(t, a)
	for _, e := range h.Log.Entries[len(h.Log.Entries)-2:] {
		resp := get("GET", e.Request.URL, "")
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if int64(len(got)) != e.Response.Content.Size {
			t.Errorf("%s: filled %d bytes, recorded size %d", e.Request.URL, len(got), e.Response.Content.Size)
		}
		again := get("GET", e.Request.URL, "")
		got2, _ := io.ReadAll(again.Body)
		again.Body.Close()
		if sha256.Sum256(got) != sha256.Sum256(got2) {
			t.Errorf("%s: filler differs between requests", e.Request.URL)
		}
	}
	if st := o.End(); st.Filled != 4 {
		t.Fatalf("filled answers %d, want 4", st.Filled)
	}
	if _, err := Prepare("p", h, Options{Missing: "maybe"}); err == nil {
		t.Fatal("policy maybe accepted")
	}
}

func TestLayout(t *testing.T) {
	h1 := testPage(t, sites.PageShape{Name: "a", Origins: 6, Requests: 30, Bytes: 100_000, SharedIPs: 2, Seed: 5})
	h2 := testPage(t, sites.PageShape{Name: "b", Origins: 3, Requests: 10, Bytes: 50_000, Seed: 6})
	a1, _ := Prepare("a", h1, Options{})
	a2, _ := Prepare("b", h2, Options{})
	l, err := NewLayout(a1, a2)
	if err != nil {
		t.Fatal(err)
	}
	// 6 hosts on 4 recorded addresses; the second page's 3 hosts are the
	// first page's first 3.
	if len(l.Groups) != 4 {
		t.Fatalf("%d groups: %+v", len(l.Groups), l.Groups)
	}
	if l.Groups[0].Hosts[0] != "www.news.example" {
		t.Fatalf("first group %v, want the document's host", l.Groups[0].Hosts)
	}
	if err := l.Assign(netip.MustParseAddr("10.7.2.2")); err != nil {
		t.Fatal(err)
	}
	m := l.HostAddrs()
	if len(m) != 6 || m["www.news.example"] != "10.7.2.10" {
		t.Fatalf("host map %v", m)
	}
	if len(l.Origins()) != 6 || !strings.HasSuffix(l.Origins()[0], ":443") {
		t.Fatalf("origins %v", l.Origins())
	}
	if _, err := OriginAddr(netip.MustParseAddr("10.7.2.2"), MaxGroups); err == nil {
		t.Fatal("address beyond the /24 accepted")
	}
}

func TestAccepts(t *testing.T) {
	for _, c := range []struct {
		ae, enc string
		want    bool
	}{
		{"gzip, deflate, br, zstd", "br", true}, {"gzip;q=1.0, br;q=0", "br", false}, {"*;q=0.1", "zstd", true},
		{"identity", "gzip", false}, {"GZIP", "gzip", true}, {"br;q=0, *", "br", false},
	} {
		if got := accepts(c.ae, c.enc); got != c.want {
			t.Errorf("accepts(%q, %q) = %v", c.ae, c.enc, got)
		}
	}
}

func TestHeadersDropped(t *testing.T) {
	e := har.Entry{Request: har.Request{Method: "GET", URL: "https://a.example/x"}, Response: har.Response{Status: 200, Headers: []har.NameValue{
		{Name: "Content-Length", Value: "99"}, {Name: "transfer-encoding", Value: "chunked"}, {Name: "alt-svc", Value: `h3=":443"`},
		{Name: "strict-transport-security", Value: "max-age=1"}, {Name: ":status", Value: "200"}, {Name: "content-encoding", Value: "gzip"},
		{Name: "nel", Value: "{}"}, {Name: "set-cookie", Value: "a=1"}, {Name: "bad", Value: "x\x01y"},
	}}}
	e.Response.Content.SetBody([]byte("hello"))
	en, err := newEntry(0, &e, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Content-Length", "Transfer-Encoding", "Alt-Svc", "Strict-Transport-Security", "Nel", "Content-Encoding", "Bad"} {
		if _, ok := en.header[h]; ok {
			t.Errorf("header %s replayed", h)
		}
	}
	if en.header.Get("Set-Cookie") != "a=1" || en.enc != "gzip" {
		t.Errorf("headers %v, coding %q", en.header, en.enc)
	}
}

var testTime = mustTime("2026-01-01T00:00:00Z")

const timeStep = 1

func durationOf(i int) time.Duration { return time.Duration(i) * time.Millisecond }

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestHeadAndPreflight(t *testing.T) {
	e := har.Entry{StartedDateTime: "2026-01-01T00:00:00Z", Request: har.Request{Method: "GET", URL: "https://a.example/api"},
		Response: har.Response{Status: 200, Headers: []har.NameValue{{Name: "Content-Type", Value: "application/json"}}}}
	e.Response.Content.SetBody([]byte(`{"ok":true}`))
	a, err := Prepare("h", &har.HAR{Log: har.Log{Version: "1.2", Entries: []har.Entry{e}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	o, get := newTestOrigins(t, a)
	resp := get("HEAD", "https://a.example/api", "")
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || resp.ContentLength != 11 {
		t.Errorf("HEAD: %d %v", resp.StatusCode, resp.Header)
	}
	resp = get("OPTIONS", "https://a.example/api", "")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("OPTIONS without a preflight header: %d, want 404", resp.StatusCode)
	}
	resp = get("OPTIONS", "https://a.example/api", "", "Origin", "https://www.example", "Access-Control-Request-Method", "PUT",
		"Access-Control-Request-Headers", "x-token")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://www.example" ||
		resp.Header.Get("Access-Control-Allow-Methods") != "PUT" || resp.Header.Get("Access-Control-Allow-Headers") != "x-token" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	st := o.End()
	if st.Requests != 1 || st.Unmatched != 1 || st.Preflights != 1 {
		t.Errorf("stats %+v", st)
	}
}
