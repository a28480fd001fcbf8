package endpoint

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint/content"
)

func serve(t *testing.T, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	h := newHandler(nil, nil)
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandlersRejectBadInput(t *testing.T) {
	cases := []struct {
		method, target string
		status         int
		msg            string
	}{
		{"GET", "/bytes/abc", 400, "/bytes/N"},
		{"GET", "/bytes/-5", 400, "/bytes/N"},
		{"GET", "/stream?segments=0", 400, "segments"},
		{"GET", "/stream?interval=forever", 400, "interval"},
		{"GET", "/stream?size=1GB", 400, "size"},
		{"GET", "/page/x/1KB", 400, "object count"},
		{"GET", "/page/3/1KB/3.png", 404, "0 <= I < 3"},
		{"GET", "/page/3/1KB/a.gif", 404, "I.png"},
		{"GET", "/upload", 405, "POST"},
		{"GET", "/nosuch", 404, ""},
	}
	for _, c := range cases {
		w := serve(t, c.method, c.target, "")
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.msg) {
			t.Errorf("%s %s: %d %q, want %d containing %q", c.method, c.target, w.Code, w.Body.String(), c.status, c.msg)
		}
		if w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q", c.target, w.Header().Get("Cache-Control"))
		}
	}
}

func TestHandlersContent(t *testing.T) {
	w := serve(t, "GET", "/bytes/10KiB", "")
	var v content.Verifier
	if w.Code != 200 || w.Body.Len() != 10240 || v.Check(w.Body.Bytes()) != nil || w.Header().Get("Content-Length") != "10240" {
		t.Fatalf("/bytes/10KiB: %d, %d bytes", w.Code, w.Body.Len())
	}
	if w := serve(t, "GET", "/echo", ""); w.Body.String() != "ok\n" {
		t.Fatalf("GET /echo: %q", w.Body.String())
	}
	if w := serve(t, "POST", "/echo", "hello"); w.Body.String() != "hello" {
		t.Fatalf("POST /echo: %q", w.Body.String())
	}
	w = serve(t, "POST", "/upload", strings.Repeat("u", 1000))
	var rep UploadReport
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil || rep.Bytes != 1000 {
		t.Fatalf("/upload: %q, %v", w.Body.String(), err)
	}
	w = serve(t, "GET", "/page/4/400-8KB", "")
	p, _ := content.ParsePage("4", "400-8KB")
	if w.Body.String() != string(p.HTML("/page/4/400-8KB")) || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("/page: %q", w.Body.String())
	}
	w = serve(t, "GET", "/page/4/400-8KB/2.png", "")
	if int64(w.Body.Len()) != p.ObjectSize(2) || w.Header().Get("Content-Type") != "image/png" {
		t.Fatalf("object: %d bytes (want %d), %s", w.Body.Len(), p.ObjectSize(2), w.Header().Get("Content-Type"))
	}
	w = serve(t, "GET", "/stream?segments=3&interval=0s&size=7", "")
	if w.Body.Len() != 21 || !w.Flushed {
		t.Fatalf("/stream: %d bytes, flushed %v", w.Body.Len(), w.Flushed)
	}
	if w := serve(t, "GET", "/", ""); !strings.Contains(w.Body.String(), "/stream?segments=K") {
		t.Fatalf("index: %q", w.Body.String())
	}
}

func TestSubresources(t *testing.T) {
	page := `<!doctype html><html><head>
<link rel="stylesheet" href="a.css"><link rel="icon" href="data:,"><link rel="canonical" href="/x">
<link rel="preload" href="/font.woff2" as="font"><link rel=" Stylesheet  alternate" href="b.css">
<script src="../js/app.js?v=1"></script><script src="https://cdn.example/x.js"></script>
<script src="//cdn.example/y.js"></script><script>var s = "<img src=no.png>";</script></head>
<body><img src="img/1.png#frag"><img src="img/1.png"><img src="javascript:alert(1)">
<video poster="p.jpg"><source src="v.mp4"></video><input type="image" src="btn.png"><input type="text" src="no2.png">
<object data="o.svg"></object><iframe src="frame.html"></iframe><a href="/nav.html">nav</a></body></html>`
	got, err := Subresources("/site/demo/pages/index.html", []byte(page))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/site/demo/pages/a.css", "/font.woff2", "/site/demo/pages/b.css", "/site/demo/js/app.js?v=1",
		"/site/demo/pages/img/1.png", "/site/demo/pages/p.jpg", "/site/demo/pages/v.mp4",
		"/site/demo/pages/btn.png", "/site/demo/pages/o.svg", "/site/demo/pages/frame.html",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	if _, err := Subresources("/%zz", nil); err == nil {
		t.Fatal("bad page path accepted")
	}
}
