package har

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const minimal = `{"log": {"version": "1.2", "creator": {"name": "t", "version": "1"},
 "pages": [{"startedDateTime": "2026-01-01T00:00:00.000Z", "id": "p1", "title": "t", "pageTimings": {}}],
 "entries": [
  {"pageref": "p1", "startedDateTime": "2026-01-01T00:00:00.100Z", "time": 1,
   "request": {"method": "GET", "url": "https://b.example/app.js", "httpVersion": "h2", "cookies": [], "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0},
   "response": {"status": 200, "statusText": "", "httpVersion": "h2", "cookies": [], "headers": [{"name": "Content-Encoding", "value": "br"}],
     "content": {"size": 5, "mimeType": "application/javascript", "text": "a=1;\n"}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
   "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0}, "serverIPAddress": "[2001:db8::1]"},
  {"pageref": "p1", "startedDateTime": "2026-01-01T00:00:00.000Z", "time": 1,
   "request": {"method": "GET", "url": "https://a.example/", "httpVersion": "h2", "cookies": [], "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0},
   "response": {"status": 200, "statusText": "", "httpVersion": "h2", "cookies": [], "headers": [],
     "content": {"size": 4, "mimeType": "image/png", "text": "iVBORw==", "encoding": "base64"}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
   "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0}, "serverIPAddress": "192.0.2.1"},
  {"startedDateTime": "2026-01-01T00:00:00.200Z", "time": 1,
   "request": {"method": "GET", "url": "https://a.example/cached.css", "httpVersion": "h2", "cookies": [], "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0},
   "response": {"status": 200, "statusText": "", "httpVersion": "h2", "cookies": [], "headers": [],
     "content": {"size": 1234, "mimeType": "text/css"}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
   "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0}},
  {"startedDateTime": "2026-01-01T00:00:00.300Z", "time": 1,
   "request": {"method": "GET", "url": "data:image/png;base64,AAAA", "httpVersion": "", "cookies": [], "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0},
   "response": {"status": 200, "statusText": "", "httpVersion": "", "cookies": [], "headers": [], "content": {"size": 3, "mimeType": "image/png"}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
   "cache": {}, "timings": {"send": 0, "wait": 0, "receive": 0}},
  {"startedDateTime": "2026-01-01T00:00:00.400Z", "time": 1,
   "request": {"method": "GET", "url": "https://blocked.example/ad.js", "httpVersion": "", "cookies": [], "headers": [], "queryString": [], "headersSize": -1, "bodySize": 0},
   "response": {"status": 0, "statusText": "", "httpVersion": "", "cookies": [], "headers": [], "content": {"size": 0, "mimeType": ""}, "redirectURL": "", "headersSize": -1, "bodySize": -1},
   "cache": {}, "timings": {"send": 0, "wait": 0, "receive": 0}}
 ]}}`

func TestReadSummarize(t *testing.T) {
	h, err := Read(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	s := h.Summarize()
	want := Summary{Entries: 5, Served: 3, Skipped: 2, Origins: 2, Hosts: 2, Addresses: 2, Bytes: 5 + 4 + 1234,
		Missing: 1, MissingBytes: 1234, Pages: 1, PageURL: "https://a.example/"}
	if s != want {
		t.Fatalf("summary\n%+v\nwant\n%+v", s, want)
	}
	body, ok := h.Log.Entries[1].Response.Content.Body()
	if !ok || !bytes.Equal(body, []byte{0x89, 'P', 'N', 'G'}) {
		t.Fatalf("base64 body %q %v", body, ok)
	}
	if v, ok := Header(h.Log.Entries[0].Response.Headers, "content-encoding"); !ok || v != "br" {
		t.Fatalf("header %q %v", v, ok)
	}
	if NormalizeIP(h.Log.Entries[0].ServerIPAddress) != "2001:db8::1" {
		t.Fatal(NormalizeIP(h.Log.Entries[0].ServerIPAddress))
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	h, err := Read(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	bin := []byte{0, 1, 2, 255, 'x'}
	h.Log.Entries[1].Response.Content.SetBody(bin)
	if h.Log.Entries[1].Response.Content.Encoding != "base64" {
		t.Fatal("binary body not stored as base64")
	}
	f := filepath.Join(t.TempDir(), "x.har")
	if err := WriteFile(f, h); err != nil {
		t.Fatal(err)
	}
	back, err := ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := back.Log.Entries[1].Response.Content.Body()
	if !bytes.Equal(got, bin) || back.Summarize() != h.Summarize() {
		t.Fatal("round trip changed the archive")
	}
}

func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "empty file"},
		{"{", "JSON syntax"},
		{"[1]", "not a HAR"},
		{`{"log": {"version": "1.2", "entries": []}}`, "no entries"},
		{`{"log": {"version": "9", "entries": [{}]}}`, `version "9"`},
		{`{"foo": 1}`, `no "log"`},
		{strings.Replace(minimal, `"method": "GET", "url": "https://a.example/"`, `"method": "", "url": "https://a.example/"`, 1), "entry 1 request.method"},
		{strings.Replace(minimal, `"url": "https://a.example/"`, `"url": "/relative"`, 1), "entry 1 request.url"},
		{strings.Replace(minimal, `"encoding": "base64"`, `"encoding": "hex"`, 1), "entry 1 response.content.encoding"},
		{strings.Replace(minimal, `"text": "iVBORw=="`, `"text": "***"`, 1), "not base64"},
		{strings.Replace(minimal, `"status": 0`, `"status": 1000`, 1), "entry 4 response.status"},
		{strings.Replace(minimal, `"status": 0`, `"status": "x"`, 1), "log.entries.response.status"},
		{minimal + "{}", "more than one"},
	} {
		_, err := Read(strings.NewReader(c.in))
		var he *Error
		if !errors.As(err, &he) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.40q: error %v, want %q", c.in, err, c.want)
		}
	}
	dir := t.TempDir()
	if _, err := ReadFile(dir); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	f := filepath.Join(dir, "bad.har")
	os.WriteFile(f, []byte("{"), 0o644)
	if _, err := ReadFile(f); err == nil || !strings.HasPrefix(err.Error(), f+": ") {
		t.Errorf("file error %v does not name the file", err)
	}
}

func TestBodyLen(t *testing.T) {
	for _, b := range [][]byte{{}, {1}, {1, 2}, {1, 2, 3}, {0, 1, 2, 3, 4}, []byte("text body")} {
		var c Content
		c.SetBody(b)
		n, ok := c.BodyLen()
		if !ok || n != int64(len(b)) {
			t.Errorf("%q: BodyLen %d %v", b, n, ok)
		}
	}
	wrapped := "AAEC\nAwQ="
	c := Content{Text: &wrapped, Encoding: "base64"}
	if n, ok := c.BodyLen(); !ok || n != 5 {
		t.Errorf("wrapped base64: %d %v", n, ok)
	}
}
