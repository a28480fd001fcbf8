// Package har reads and writes HTTP Archive (HAR) 1.2 files, the format
// every browser's developer tools export a page load in (W3C Web
// Performance Working Group draft, "HTTP Archive (HAR) format", version
// 1.2; http://www.softwareishard.com/blog/har-12-spec/).
//
// Read parses a HAR and checks every field a replay depends on, naming
// the entry and the field of the first problem; Write writes one. The
// types keep the fields of the specification; browsers' own fields
// (Chrome's "_resourceType", "_transferSize" and the like) are not kept.
//
// A HAR stores response bodies decoded: Content.Text is the body after
// Content-Encoding was undone (and base64 when Content.Encoding says so),
// while the recorded headers still carry the Content-Encoding and
// Content-Length of the wire. Body returns the decoded bytes; Summarize
// counts the entries whose body the export left out (served from the
// browser's cache, or cut at a size limit) and the bytes they miss.
//
// Standard library only: plans read HARs to validate and estimate them.
package har

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
)

// HAR is a whole archive: {"log": {...}}.
type HAR struct {
	Log Log `json:"log"`
}

// Log is the archive's root object.
type Log struct {
	Version string   `json:"version"`
	Creator Creator  `json:"creator"`
	Browser *Creator `json:"browser,omitempty"`
	Pages   []Page   `json:"pages,omitempty"`
	Entries []Entry  `json:"entries"`
	Comment string   `json:"comment,omitempty"`
}

// Creator names the application that wrote the archive (and Log.Browser
// the browser it recorded).
type Creator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Comment string `json:"comment,omitempty"`
}

// Page is one page load of the archive.
type Page struct {
	StartedDateTime string      `json:"startedDateTime"`
	ID              string      `json:"id"`
	Title           string      `json:"title"`
	PageTimings     PageTimings `json:"pageTimings"`
	Comment         string      `json:"comment,omitempty"`
}

// PageTimings are a page's DOMContentLoaded and load times, in ms from
// its start (-1 when not known).
type PageTimings struct {
	OnContentLoad *float64 `json:"onContentLoad,omitempty"`
	OnLoad        *float64 `json:"onLoad,omitempty"`
	Comment       string   `json:"comment,omitempty"`
}

// Entry is one request and its response.
type Entry struct {
	Pageref         string   `json:"pageref,omitempty"`
	StartedDateTime string   `json:"startedDateTime"`
	Time            float64  `json:"time"`
	Request         Request  `json:"request"`
	Response        Response `json:"response"`
	Cache           Cache    `json:"cache"`
	Timings         Timings  `json:"timings"`
	ServerIPAddress string   `json:"serverIPAddress,omitempty"`
	Connection      string   `json:"connection,omitempty"`
	Comment         string   `json:"comment,omitempty"`
}

// Request is a recorded request.
type Request struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	QueryString []NameValue `json:"queryString"`
	PostData    *PostData   `json:"postData,omitempty"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
	Comment     string      `json:"comment,omitempty"`
}

// Response is a recorded response.
type Response struct {
	Status      int         `json:"status"`
	StatusText  string      `json:"statusText"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	Content     Content     `json:"content"`
	RedirectURL string      `json:"redirectURL"`
	HeadersSize int64       `json:"headersSize"`
	BodySize    int64       `json:"bodySize"`
	Comment     string      `json:"comment,omitempty"`
}

// Content is a response body as the archive stores it: decoded (no
// Content-Encoding), in Text, base64 when Encoding is "base64". Size is
// the decoded length; Compression the bytes the Content-Encoding saved.
// Text is nil when the export left the body out.
type Content struct {
	Size        int64   `json:"size"`
	Compression *int64  `json:"compression,omitempty"`
	MimeType    string  `json:"mimeType"`
	Text        *string `json:"text,omitempty"`
	Encoding    string  `json:"encoding,omitempty"`
	Comment     string  `json:"comment,omitempty"`
}

// NameValue is a header, query parameter or post parameter.
type NameValue struct {
	Name    string `json:"name"`
	Value   string `json:"value"`
	Comment string `json:"comment,omitempty"`
}

// Cookie is a request or response cookie.
type Cookie struct {
	Name     string `json:"name"`
	Value    string `json:"value"`
	Path     string `json:"path,omitempty"`
	Domain   string `json:"domain,omitempty"`
	Expires  string `json:"expires,omitempty"`
	HTTPOnly bool   `json:"httpOnly,omitempty"`
	Secure   bool   `json:"secure,omitempty"`
	Comment  string `json:"comment,omitempty"`
}

// PostData is a request body.
type PostData struct {
	MimeType string      `json:"mimeType"`
	Params   []NameValue `json:"params,omitempty"`
	Text     string      `json:"text"`
	Comment  string      `json:"comment,omitempty"`
}

// Cache describes the browser cache's state around the entry (usually
// empty).
type Cache struct {
	BeforeRequest *CacheState `json:"beforeRequest,omitempty"`
	AfterRequest  *CacheState `json:"afterRequest,omitempty"`
	Comment       string      `json:"comment,omitempty"`
}

// CacheState is one cache entry's state.
type CacheState struct {
	Expires    string `json:"expires,omitempty"`
	LastAccess string `json:"lastAccess"`
	ETag       string `json:"eTag"`
	HitCount   int    `json:"hitCount"`
	Comment    string `json:"comment,omitempty"`
}

// Timings are the phases of an entry, in ms (-1 when not applicable).
type Timings struct {
	Blocked *float64 `json:"blocked,omitempty"`
	DNS     *float64 `json:"dns,omitempty"`
	Connect *float64 `json:"connect,omitempty"`
	Send    float64  `json:"send"`
	Wait    float64  `json:"wait"`
	Receive float64  `json:"receive"`
	SSL     *float64 `json:"ssl,omitempty"`
	Comment string   `json:"comment,omitempty"`
}

// Error is a problem of an archive: where (the entry, 0-based, or -1 for
// the log itself, and the field's JSON path) and what.
type Error struct {
	File  string // the file, when read from one
	Entry int    // -1: not an entry's
	Field string // e.g. "response.content.encoding"
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File + ": ")
	}
	if e.Entry >= 0 {
		fmt.Fprintf(&b, "entry %d", e.Entry)
		if e.Field != "" {
			b.WriteString(" " + e.Field)
		}
		b.WriteString(": ")
	} else if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// MaxSize is the largest archive Read accepts (a guard against reading a
// file that is not a HAR whole into memory).
const MaxSize = 2 << 30

// Read parses and checks an archive (see Check). The error is an *Error
// for a problem of the archive's content.
func Read(r io.Reader) (*HAR, error) {
	dec := json.NewDecoder(io.LimitReader(r, MaxSize+1))
	var h HAR
	if err := dec.Decode(&h); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return nil, &Error{Entry: -1, Msg: fmt.Sprintf("not a HAR (JSON syntax error at byte %d: %v)", se.Offset, err)}
		case errors.As(err, &te):
			return nil, &Error{Entry: -1, Field: te.Field, Msg: fmt.Sprintf("not a HAR: %s is a JSON %s, want %s", te.Field, te.Value, te.Type)}
		case errors.Is(err, io.EOF):
			return nil, &Error{Entry: -1, Msg: "empty file, not a HAR"}
		case errors.Is(err, io.ErrUnexpectedEOF):
			return nil, &Error{Entry: -1, Msg: "not a HAR: the JSON ends early (a JSON syntax error: a cut-off file?)"}
		}
		return nil, &Error{Entry: -1, Msg: fmt.Sprintf("not a HAR: %v", err)}
	}
	if dec.More() {
		return nil, &Error{Entry: -1, Msg: "not a HAR: more than one JSON value"}
	}
	if err := h.Check(); err != nil {
		return nil, err
	}
	return &h, nil
}

// ReadFile reads and checks the archive in a file; errors name the file.
func ReadFile(name string) (*HAR, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, &Error{File: name, Entry: -1, Msg: "a directory, not a HAR file"}
	} else if err == nil && st.Size() > MaxSize {
		return nil, &Error{File: name, Entry: -1, Msg: fmt.Sprintf("%d bytes is larger than the %d a HAR may have here", st.Size(), int64(MaxSize))}
	}
	h, err := Read(f)
	var he *Error
	if errors.As(err, &he) {
		he.File = name
	}
	return h, err
}

// Check reports the first problem of the archive that would stop a
// replay: no entries, a request without a method or an absolute http(s)
// URL, a status out of range, a body whose encoding is neither empty nor
// base64, or base64 that does not decode.
func (h *HAR) Check() error {
	l := &h.Log
	if l.Version == "" && l.Entries == nil {
		return &Error{Entry: -1, Msg: `not a HAR: no "log" object with "version" and "entries"`}
	}
	switch l.Version {
	case "1.1", "1.2", "":
	default:
		return &Error{Entry: -1, Field: "log.version", Msg: fmt.Sprintf("version %q: HAR 1.1 and 1.2 are read", l.Version)}
	}
	if len(l.Entries) == 0 {
		return &Error{Entry: -1, Field: "log.entries", Msg: "no entries: the archive records no request"}
	}
	var buf []byte
	for i := range l.Entries {
		if err := l.Entries[i].check(&buf); err != nil {
			err.Entry = i
			return err
		}
	}
	return nil
}

// check checks one entry; buf is scratch space for decoding base64.
func (e *Entry) check(buf *[]byte) *Error {
	bad := func(field, format string, a ...any) *Error {
		return &Error{Field: field, Msg: fmt.Sprintf(format, a...)}
	}
	m := e.Request.Method
	if m == "" || strings.ContainsAny(m, " \t\r\n/:") {
		return bad("request.method", "%q is not an HTTP method", m)
	}
	u, err := url.Parse(e.Request.URL)
	if err != nil {
		return bad("request.url", "%q: %v", e.Request.URL, err)
	}
	if !u.IsAbs() {
		return bad("request.url", "%q is not an absolute URL", e.Request.URL)
	}
	if (u.Scheme == "http" || u.Scheme == "https") && u.Hostname() == "" {
		return bad("request.url", "%q has no host", e.Request.URL)
	}
	if s := e.Response.Status; s < 0 || s > 999 {
		return bad("response.status", "%d is not an HTTP status", s)
	}
	c := &e.Response.Content
	switch c.Encoding {
	case "", "base64":
	default:
		return bad("response.content.encoding", "%q: only base64 (or none) is defined", c.Encoding)
	}
	if c.Encoding == "base64" && c.Text != nil {
		if err := checkBase64(*c.Text, buf); err != nil {
			return bad("response.content.text", "not base64: %v", err)
		}
	}
	if e.StartedDateTime != "" {
		if _, err := time.Parse(time.RFC3339Nano, e.StartedDateTime); err != nil {
			return bad("startedDateTime", "%q is not an ISO 8601 date and time", e.StartedDateTime)
		}
	}
	return nil
}

// decodeBase64 decodes standard base64, padded or not, ignoring line
// breaks (some exporters wrap long lines).
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
}

// checkBase64 reports whether s decodes as decodeBase64 decodes it,
// decoding into *buf (grown as needed) instead of allocating.
func checkBase64(s string, buf *[]byte) error {
	if strings.ContainsAny(s, "\r\n") {
		_, err := decodeBase64(s)
		return err
	}
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
		s = strings.TrimRight(s, "=")
	}
	if n := enc.DecodedLen(len(s)); cap(*buf) < n {
		*buf = make([]byte, n)
	}
	_, err := enc.Decode((*buf)[:cap(*buf)], []byte(s))
	return err
}

// BodyLen returns the length of the body the archive holds, without
// decoding it when it can, and whether it holds one.
func (c *Content) BodyLen() (int64, bool) {
	if c.Text == nil {
		return 0, false
	}
	t := *c.Text
	if c.Encoding != "base64" {
		return int64(len(t)), true
	}
	if strings.ContainsAny(t, "\r\n") || len(t)%4 != 0 {
		b, ok := c.Body()
		return int64(len(b)), ok
	}
	n := int64(len(t) / 4 * 3)
	switch {
	case strings.HasSuffix(t, "=="):
		n -= 2
	case strings.HasSuffix(t, "="):
		n--
	}
	return n, true
}

// Body returns the response body the archive holds (decoded from base64
// when needed) and whether it holds one (false when the export left it
// out: Text absent).
func (c *Content) Body() ([]byte, bool) {
	if c.Text == nil {
		return nil, false
	}
	if c.Encoding == "base64" {
		b, err := decodeBase64(*c.Text)
		if err != nil {
			return nil, false
		}
		return b, true
	}
	return []byte(*c.Text), true
}

// SetBody stores body in the content: as text when it is valid UTF-8
// without NUL bytes, else base64. Size is set to its length.
func (c *Content) SetBody(body []byte) {
	var s string
	if isText(body) {
		s = string(body)
		c.Encoding = ""
	} else {
		s = base64.StdEncoding.EncodeToString(body)
		c.Encoding = "base64"
	}
	c.Text = &s
	c.Size = int64(len(body))
}

func isText(b []byte) bool {
	for _, c := range b {
		if c == 0 {
			return false
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD") == string(b)
}

// Header returns the value of the first header named name (case
// insensitive), and whether there is one.
func Header(hs []NameValue, name string) (string, bool) {
	for _, h := range hs {
		if strings.EqualFold(h.Name, name) {
			return h.Value, true
		}
	}
	return "", false
}

// Write writes the archive as indented JSON.
func Write(w io.Writer, h *HAR) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(h)
}

// WriteFile writes the archive to a file (created or truncated).
func WriteFile(name string, h *HAR) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := Write(f, h); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Time formats t as a HAR date and time (ISO 8601 with milliseconds).
func Time(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z07:00") }
