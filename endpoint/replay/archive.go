// Package replay serves recorded page loads (HAR 1.2 archives, package
// har) as their origins served them: the archive index and request
// matching, response bodies and their encodings, the run-wide layout of
// origins on addresses, and the per-sample bookkeeping of what was served.
// Package endpoint listens on every origin's address and hands each
// request to Origins.Handler.
//
// Matching follows Web Page Replay's: a request is answered by the
// recorded entry with the same method and URL (the k-th request for a URL
// within a sample by the k-th recording of it, the last one again
// after that); else, among the entries with the same method, host and
// path, by the one whose query parameters match best; else by a 404 that
// is counted. A HEAD without a recording of its own gets the GET's
// headers, and a CORS preflight (OPTIONS) without one is allowed (204),
// since browsers' exports often leave preflights out.
//
// Bodies: a HAR stores them decoded, so the recorded Content-Length,
// Transfer-Encoding and Content-Encoding are dropped, the body is sent
// with its real length, and compressed again (gzip, br, deflate or zstd)
// when the recorded response was compressed and the request accepts that
// encoding (gzip when it accepts only that). Hop-by-hop headers and
// headers that would make the browser contact something else or change
// protocol (Alt-Svc, Strict-Transport-Security, NEL, Report-To...) are
// dropped; Timing-Allow-Origin: * is added, so that the browser exposes
// every cross-origin resource's protocol and sizes to the measurement.
package replay

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/zstd"

	"github.com/quicbench/quicbench/har"
)

// Missing-body policies (a plan's missing_bodies).
const (
	MissingRefuse = "refuse" // an archive with entries lacking their body is refused
	MissingFill   = "fill"   // such entries are served with filler bytes of the recorded size
)

// Options tune how an archive is prepared.
type Options struct {
	// Missing is MissingRefuse (the default when empty) or MissingFill.
	Missing string
	// IndexOnly indexes the entries without decoding or compressing their
	// bodies: enough for a layout and the page's URLs, not for serving.
	IndexOnly bool
}

// MissingError is the refusal of an archive whose entries lack bodies
// under MissingRefuse.
type MissingError struct {
	Name    string
	Entries int
	Bytes   int64
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s: %d %s without a body (%d bytes missing: the export left them out or cut them short); "+
		"record again with the cache disabled (docs/plan-format.md), or serve filler bytes of the recorded size with missing_bodies: fill",
		e.Name, e.Entries, plural(e.Entries, "entry", "entries"), e.Bytes)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Archive is an archive prepared for serving.
type Archive struct {
	Name    string
	PageURL string      // the document a replay navigates to
	Summary har.Summary // what the archive holds
	// Filled counts the entries served with filler bytes (MissingFill).
	Filled int

	entries []*entry
	exact   map[string][]*entry // method, host, request URI -> recordings in order
	byPath  map[string][]*entry // method, host, path -> recordings in order
	hosts   map[string]bool
	// ips are the recorded server addresses by host (for the layout).
	ips map[string][]string
	// hostOrder lists the hosts in the order their first entry started.
	hostOrder []string
	ports     map[string][]int // host -> ports served
}

// entry is one recorded response, ready to serve.
type entry struct {
	index  int // in the archive
	url    string
	method string
	host   string // lower case, no port
	port   int
	uri    string // request URI: escaped path and query
	path   string
	query  url.Values
	status int
	header http.Header // what is replayed of the recorded headers
	body   []byte      // decoded
	filled bool
	// enc is the recorded Content-Encoding this package can produce
	// again ("" when the response was not compressed, or with another).
	enc string

	mu      sync.Mutex
	encoded map[string][]byte // encoding -> compressed body
}

// Prepare indexes an archive for serving under name, decoding every body
// and compressing those recorded compressed in their encoding (so that no
// sample pays for it). It fails on an archive without a served https
// document, and under MissingRefuse on entries without their body.
func Prepare(name string, h *har.HAR, opts Options) (*Archive, error) {
	switch opts.Missing {
	case "", MissingRefuse, MissingFill:
	default:
		return nil, fmt.Errorf("replay: missing-body policy %q (want %s or %s)", opts.Missing, MissingRefuse, MissingFill)
	}
	a := &Archive{Name: name, Summary: h.Summarize(), exact: map[string][]*entry{}, byPath: map[string][]*entry{},
		hosts: map[string]bool{}, ips: map[string][]string{}, ports: map[string][]int{}}
	if a.Summary.Served == 0 {
		return nil, fmt.Errorf("replay: %s: no entry to serve (%d entries, none an http(s) request with a response)", name, a.Summary.Entries)
	}
	if opts.Missing != MissingFill && a.Summary.Missing > 0 {
		return nil, &MissingError{Name: name, Entries: a.Summary.Missing, Bytes: a.Summary.MissingBytes}
	}
	doc := h.Document()
	a.PageURL = h.Log.Entries[doc].Request.URL
	if u, _ := url.Parse(a.PageURL); u.Scheme != "https" {
		return nil, fmt.Errorf("replay: %s: the page's document %s is not https: quicbench replays HTTPS pages (HTTP/3 needs TLS)", name, a.PageURL)
	}
	for _, i := range h.SortedEntries() {
		he := &h.Log.Entries[i]
		if !he.Served() {
			continue
		}
		e, err := newEntry(i, he, !opts.IndexOnly)
		if err != nil {
			return nil, fmt.Errorf("replay: %s: entry %d (%s): %w", name, i, he.Request.URL, err)
		}
		if e.filled {
			a.Filled++
		}
		a.entries = append(a.entries, e)
		k := e.method + " " + e.host + e.uri
		a.exact[k] = append(a.exact[k], e)
		pk := e.method + " " + e.host + e.path
		a.byPath[pk] = append(a.byPath[pk], e)
		if !a.hosts[e.host] {
			a.hosts[e.host] = true
			a.hostOrder = append(a.hostOrder, e.host)
		}
		if !slices.Contains(a.ports[e.host], e.port) {
			a.ports[e.host] = append(a.ports[e.host], e.port)
		}
		if ip := har.NormalizeIP(he.ServerIPAddress); ip != "" && !slices.Contains(a.ips[e.host], ip) {
			a.ips[e.host] = append(a.ips[e.host], ip)
		}
	}
	if !opts.IndexOnly {
		a.precompress()
	}
	return a, nil
}

// URLs returns the URLs of the served entries, the document first, then
// the others in the order they started (each URL once).
func (a *Archive) URLs() []string {
	out := []string{a.PageURL}
	seen := map[string]bool{a.PageURL: true}
	for _, e := range a.entries {
		u := e.url
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	return out
}

// newEntry prepares one served entry (with its body when bodies is set).
func newEntry(i int, he *har.Entry, bodies bool) (*entry, error) {
	u, err := url.Parse(he.Request.URL)
	if err != nil {
		return nil, err
	}
	e := &entry{
		index:  i,
		url:    he.Request.URL,
		method: strings.ToUpper(he.Request.Method),
		host:   strings.ToLower(u.Hostname()),
		uri:    requestURI(u),
		path:   u.EscapedPath(),
		query:  u.Query(),
		status: he.Response.Status,
		header: http.Header{},
	}
	if e.path == "" {
		e.path = "/"
	}
	e.port = 443
	if p := u.Port(); p != "" {
		if _, err := fmt.Sscan(p, &e.port); err != nil || e.port < 1 || e.port > 65535 {
			return nil, fmt.Errorf("port %q", p)
		}
	}
	for _, h := range he.Response.Headers {
		name := http.CanonicalHeaderKey(strings.TrimSpace(h.Name))
		if name == "" || strings.HasPrefix(name, ":") || dropped[name] || !validHeader(name, h.Value) {
			continue
		}
		if name == "Content-Encoding" {
			continue
		}
		e.header.Add(name, h.Value)
	}
	if ce, ok := har.Header(he.Response.Headers, "Content-Encoding"); ok {
		e.enc = knownEncoding(ce)
	}
	if he.HasBody() && bodies {
		body, ok := he.Response.Content.Body()
		missing, _ := he.MissingBytes()
		if !ok || missing > 0 {
			body = filler(body, len(body)+int(missing), he.Response.Content.MimeType, uint64(i))
			e.filled = true
		}
		e.body = body
	}
	e.header.Set("Timing-Allow-Origin", "*")
	return e, nil
}

// requestURI is the escaped path and query of u ("/" for an empty path),
// as a request line carries them.
func requestURI(u *url.URL) string {
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" || u.ForceQuery {
		p += "?" + u.RawQuery
	}
	return p
}

// dropped are the recorded response headers never replayed: the framing
// the server redoes (Content-Length, Transfer-Encoding; Content-Encoding
// is decided per request), hop-by-hop headers, and headers that would make
// the browser switch protocol or contact other hosts (Alt-Svc,
// Strict-Transport-Security, NEL and Report-To reports, pinning).
var dropped = map[string]bool{
	"Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Keep-Alive": true,
	"Proxy-Connection": true, "Upgrade": true, "Te": true, "Trailer": true, "Http2-Settings": true,
	"Alt-Svc": true, "Strict-Transport-Security": true, "Public-Key-Pins": true, "Public-Key-Pins-Report-Only": true,
	"Expect-Ct": true, "Nel": true, "Report-To": true, "Reporting-Endpoints": true, "Content-Md5": true,
	"Timing-Allow-Origin": true,
}

// validHeader reports whether a header can be sent as it is (HTTP/2 and
// HTTP/3 refuse control characters in values).
func validHeader(name, value string) bool {
	for _, c := range name {
		if c <= ' ' || c >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", c) {
			return false
		}
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Encodings are the content codings a replay can apply, by name.
var Encodings = []string{"gzip", "br", "deflate", "zstd"}

// knownEncoding returns the last coding of a Content-Encoding value when
// it is one of Encodings, else "".
func knownEncoding(v string) string {
	parts := strings.Split(v, ",")
	last := strings.ToLower(strings.TrimSpace(parts[len(parts)-1]))
	if slices.Contains(Encodings, last) {
		return last
	}
	return ""
}

// filler returns body extended to size bytes (body itself when it is not
// shorter): text types get printable text (a comment in scripts and style
// sheets), other types pseudo-random bytes, seeded by the entry so that
// every sample and protocol serves the same bytes.
func filler(body []byte, size int, mime string, seed uint64) []byte {
	if size <= len(body) {
		return body
	}
	out := make([]byte, len(body), size)
	copy(out, body)
	rng := rand.New(rand.NewPCG(seed, 0x71756963))
	m := strings.ToLower(mime)
	text := strings.HasPrefix(m, "text/") || strings.Contains(m, "javascript") || strings.Contains(m, "json") ||
		strings.Contains(m, "xml") || strings.Contains(m, "css")
	if !text {
		for len(out) < size {
			out = append(out, byte(rng.Uint32()))
		}
		return out
	}
	open, end := "", ""
	if (strings.Contains(m, "javascript") || strings.Contains(m, "css")) && size-len(out) >= 4 {
		open, end = "/*", "*/"
	}
	out = append(out, open...)
	const letters = "abcdefghijklmnopqrstuvwxyz     "
	for len(out) < size-len(end) {
		out = append(out, letters[rng.IntN(len(letters))])
	}
	return append(out, end...)
}

// precompress compresses every body recorded compressed, in its
// encoding, on all CPUs.
func (a *Archive) precompress() {
	var todo []*entry
	for _, e := range a.entries {
		if e.enc != "" && len(e.body) > 0 {
			todo = append(todo, e)
		}
	}
	work := make(chan *entry)
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(todo))) {
		wg.Go(func() {
			for e := range work {
				e.encode(e.enc)
			}
		})
	}
	for _, e := range todo {
		work <- e
	}
	close(work)
	wg.Wait()
}

// encode returns the body in encoding enc ("" for none), compressing it
// once.
func (e *entry) encode(enc string) []byte {
	if enc == "" {
		return e.body
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if b, ok := e.encoded[enc]; ok {
		return b
	}
	b, err := compress(enc, e.body)
	if err != nil {
		return nil
	}
	if e.encoded == nil {
		e.encoded = map[string][]byte{}
	}
	e.encoded[enc] = b
	return b
}

// Compression settings: what servers commonly use for responses they
// compress on the fly (zlib's default level; brotli quality 5).
const (
	gzipLevel     = gzip.DefaultCompression
	brotliQuality = 5
)

var zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
})

// compress encodes b with the content coding enc.
func compress(enc string, b []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch enc {
	case "gzip":
		w, _ := gzip.NewWriterLevel(&buf, gzipLevel)
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case "deflate": // HTTP's deflate is the zlib format (RFC 9110 8.4.1.2)
		w, _ := zlib.NewWriterLevel(&buf, gzipLevel)
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case "br":
		w := brotli.NewWriterLevel(&buf, brotliQuality)
		if _, err := w.Write(b); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
	case "zstd":
		z, err := zstdEncoder()
		if err != nil {
			return nil, err
		}
		return z.EncodeAll(b, nil), nil
	default:
		return nil, fmt.Errorf("unknown content coding %q", enc)
	}
	return buf.Bytes(), nil
}

// accepts reports whether an Accept-Encoding value allows coding enc
// (with a q-value above 0, by name or by "*").
func accepts(acceptEncoding, enc string) bool {
	star := false
	for _, part := range strings.Split(acceptEncoding, ",") {
		name, params, _ := strings.Cut(part, ";")
		name = strings.ToLower(strings.TrimSpace(name))
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if _, err := fmt.Sscan(strings.TrimSpace(v), &q); err != nil {
					q = 0
				}
			}
		}
		switch name {
		case enc:
			return q > 0
		case "*":
			star = q > 0
		}
	}
	return star
}

// choose returns the coding to answer a request that accepts
// acceptEncoding with: the recorded one when accepted, else gzip when the
// response was compressed and gzip is accepted, else none.
func (e *entry) choose(acceptEncoding string) string {
	if e.enc == "" || len(e.body) == 0 {
		return ""
	}
	if accepts(acceptEncoding, e.enc) {
		return e.enc
	}
	if accepts(acceptEncoding, "gzip") {
		return "gzip"
	}
	return ""
}

// Hosts returns the archive's host names in the order their first
// request started.
func (a *Archive) Hosts() []string { return slices.Clone(a.hostOrder) }

// Ports returns the ports host is served on (443 unless the archive
// names others).
func (a *Archive) Ports(host string) []int { return slices.Clone(a.ports[strings.ToLower(host)]) }

// Entries is the number of served entries.
func (a *Archive) Entries() int { return len(a.entries) }

// errNoMatch is a request no entry answers.
var errNoMatch = errors.New("no recorded entry")

// queryScore is how well query q matches recorded query r: twice the
// parameters (name and value) they share over the parameters of both
// (1 for equal queries, 0 when they share nothing), as Web Page Replay
// rates them.
func queryScore(q, r url.Values) float64 {
	total := 0
	for _, vs := range q {
		total += len(vs)
	}
	for _, vs := range r {
		total += len(vs)
	}
	if total == 0 {
		return 1
	}
	shared := 0
	for k, vs := range q {
		rv := slices.Clone(r[k])
		for _, v := range vs {
			if i := slices.Index(rv, v); i >= 0 {
				shared++
				rv = slices.Delete(rv, i, i+1)
			}
		}
	}
	return float64(2*shared) / float64(total)
}
