package browser

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/quicbench/quicbench/har"
)

// RecordOptions tune a recording (Record).
type RecordOptions struct {
	// Quiet is how long the network must stay idle after the load event
	// before the recording ends, so that requests a page makes after its
	// load are recorded too (default 1 s).
	Quiet time.Duration
	// Creator names the program in the archive (default "quicbench").
	Creator, CreatorVersion string
}

// DefaultRecordQuiet is RecordOptions.Quiet's default.
const DefaultRecordQuiet = time.Second

// recBufferTotal and recBufferResource are the DevTools network buffers
// asked for, so that no response body is evicted before it is read (the
// default keeps about 10 MB per resource, the cause of bodies missing from
// DevTools' own exports).
const (
	recBufferTotal    = 1 << 30
	recBufferResource = 512 << 20
)

// Record starts headless Chromium with opts (a fresh profile; its cache
// disabled), loads pageURL once, waits for its load event and then for
// the network to be quiet, and returns the page load as a HAR 1.2 archive
// with every response body (from the DevTools protocol's network events
// and Network.getResponseBody): what `quicbench record` writes. Requests
// that failed are kept with status 0 (a replay skips them).
func Record(ctx context.Context, opts Options, pageURL string, ro RecordOptions) (*har.HAR, error) {
	opts.URL = pageURL
	opts.DisableCache = true
	return once(ctx, opts, func(s *Session, u string) (*har.HAR, error) { return s.record(ctx, u, ro) })
}

// recEntry is one request being recorded.
type recEntry struct {
	id       network.RequestID
	req      *network.Request
	wall     time.Time         // when it was sent
	ts       cdp.MonotonicTime // when it was sent (monotonic)
	resp     *network.Response
	done     bool
	failed   string
	endTS    cdp.MonotonicTime
	encoded  float64 // bytes received, headers included
	bodySize float64 // body bytes before decoding
	decoded  int64   // body bytes after decoding
	order    int
}

// recorder collects network events.
type recorder struct {
	mu       sync.Mutex
	entries  []*recEntry
	live     map[network.RequestID]*recEntry
	inflight int
	lastNet  time.Time
	loaded   time.Time // load event seen (zero until)
	dclTS    cdp.MonotonicTime
	loadTS   cdp.MonotonicTime
	firstTS  cdp.MonotonicTime
	firstW   time.Time
}

func (r *recorder) event(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		if e.Request == nil {
			return
		}
		if prev := r.live[e.RequestID]; prev != nil && e.RedirectResponse != nil {
			// The same id goes on after a redirect: the old entry ends
			// with the redirect response.
			prev.resp, prev.done, prev.endTS = e.RedirectResponse, true, e.Timestamp
			prev.encoded = e.RedirectResponse.EncodedDataLength
			r.inflight--
		}
		re := &recEntry{id: e.RequestID, req: e.Request, ts: e.Timestamp, order: len(r.entries)}
		re.wall = time.UnixMicro(int64(math.Round(e.WallTime.Float64() * 1e6)))
		if len(r.entries) == 0 {
			r.firstTS, r.firstW = e.Timestamp, re.wall
		}
		r.entries = append(r.entries, re)
		r.live[e.RequestID] = re
		r.inflight++
	case *network.EventResponseReceived:
		if re := r.live[e.RequestID]; re != nil {
			re.resp = e.Response
		}
	case *network.EventDataReceived:
		if re := r.live[e.RequestID]; re != nil {
			re.bodySize += float64(e.EncodedDataLength)
			re.decoded += e.DataLength
		}
	case *network.EventLoadingFinished:
		if re := r.live[e.RequestID]; re != nil && !re.done {
			re.done, re.endTS, re.encoded = true, e.Timestamp, e.EncodedDataLength
			if e.EncodedBodyLength > 0 {
				re.bodySize = e.EncodedBodyLength
			}
			r.inflight--
		}
	case *network.EventLoadingFailed:
		if re := r.live[e.RequestID]; re != nil && !re.done {
			re.done, re.endTS, re.failed = true, e.Timestamp, e.ErrorText
			if e.BlockedReason != "" {
				re.failed += " (blocked: " + string(e.BlockedReason) + ")"
			}
			r.inflight--
		}
	case *page.EventDomContentEventFired:
		r.dclTS = e.Timestamp
	case *page.EventLoadEventFired:
		r.loadTS = e.Timestamp
		r.loaded = now
	default:
		return
	}
	r.lastNet = now
}

// quietFor reports whether the page has loaded and no request has been in
// flight (nor any network event come) for d.
func (r *recorder) quietFor(d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.loaded.IsZero() && r.inflight <= 0 && time.Since(r.lastNet) >= d && time.Since(r.loaded) >= d
}

// startRecording starts collecting the tab's network events (with the
// DevTools buffers raised, so that bodies stay readable) until stop.
func (s *Session) startRecording(ctx context.Context) (rec *recorder, stop func(), err error) {
	lctx, cancel := context.WithCancel(s.bctx)
	rec = &recorder{live: map[network.RequestID]*recEntry{}}
	if err := chromedp.Listen(lctx, rec.event); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("browser: recording: %w", err)
	}
	total, per := int64(recBufferTotal), int64(recBufferResource)
	err = chromedp.Do(lctx,
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, network.Enable, network.EnableParams{MaxTotalBufferSize: &total, MaxResourceBufferSize: &per})
			return err
		}),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, page.Enable, page.EnableParams{})
			return err
		}),
	)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("browser: recording: enabling network events: %w", err)
	}
	return rec, cancel, nil
}

// record loads u in the session's tab and records it.
func (s *Session) record(ctx context.Context, u string, ro RecordOptions) (*har.HAR, error) {
	if ro.Quiet <= 0 {
		ro.Quiet = DefaultRecordQuiet
	}
	lctx, cancel := context.WithTimeout(s.bctx, s.opts.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	rec, stopRec, err := s.startRecording(lctx)
	if err != nil {
		return nil, err
	}
	defer stopRec()
	if _, err := chromedp.Run(lctx, chromedp.NavigateResponse(u)); err != nil {
		return nil, s.tab().loadError(ctx, lctx, u, err)
	}
	for !rec.quietFor(ro.Quiet) {
		select {
		case <-lctx.Done():
			return nil, s.tab().loadError(ctx, lctx, u, lctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	title, _ := chromedp.Run(lctx, chromedp.Evaluate[string]("document.title"))
	h, err := s.recorded(lctx, rec, title, ro, true)
	if err != nil {
		return nil, err
	}
	if len(h.Log.Entries) == 0 {
		return nil, fmt.Errorf("browser: record %s: no request was recorded", u)
	}
	return h, nil
}

// recorded turns what rec collected into an archive, reading the bodies
// when bodies is set.
func (s *Session) recorded(ctx context.Context, rec *recorder, title string, ro RecordOptions, bodies bool) (*har.HAR, error) {
	rec.mu.Lock()
	entries := append([]*recEntry(nil), rec.entries...)
	firstTS, firstW, dclTS, loadTS := rec.firstTS, rec.firstW, rec.dclTS, rec.loadTS
	rec.mu.Unlock()
	h := &har.HAR{Log: har.Log{
		Version: "1.2",
		Creator: har.Creator{Name: orDefault(ro.Creator, "quicbench"), Version: orDefault(ro.CreatorVersion, "record")},
		Browser: &har.Creator{Name: "Chromium", Version: strings.TrimPrefix(s.version, "Chrome/")},
	}}
	ms := func(a, b cdp.MonotonicTime) float64 { return (b.Float64() - a.Float64()) * 1000 }
	pt := har.PageTimings{}
	if dclTS > 0 && firstTS > 0 {
		v := ms(firstTS, dclTS)
		pt.OnContentLoad = &v
	}
	if loadTS > 0 && firstTS > 0 {
		v := ms(firstTS, loadTS)
		pt.OnLoad = &v
	}
	h.Log.Pages = []har.Page{{StartedDateTime: har.Time(firstW), ID: "page_1", Title: title, PageTimings: pt}}
	for _, re := range entries {
		e, ok, err := s.recEntry(ctx, re, bodies)
		if err != nil {
			return nil, err
		}
		if ok {
			h.Log.Entries = append(h.Log.Entries, e)
		}
	}
	sort.SliceStable(h.Log.Entries, func(i, j int) bool { return h.Log.Entries[i].StartedDateTime < h.Log.Entries[j].StartedDateTime })
	return h, nil
}

// settle waits until no recorded request is in flight, for at most d.
func (r *recorder) settle(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		n := r.inflight
		r.mu.Unlock()
		if n <= 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// recEntry turns a recorded request into a HAR entry, reading its body;
// ok is false for what a HAR does not hold (data: and other non-HTTP
// URLs).
func (s *Session) recEntry(ctx context.Context, re *recEntry, bodies bool) (har.Entry, bool, error) {
	pu, err := url.Parse(re.req.URL)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") {
		return har.Entry{}, false, nil
	}
	e := har.Entry{
		Pageref:         "page_1",
		StartedDateTime: har.Time(re.wall),
		Request: har.Request{
			Method: re.req.Method, URL: re.req.URL + re.req.URLFragment, HTTPVersion: "",
			Cookies: []har.Cookie{}, Headers: headerList(re.req.Headers), QueryString: queryList(pu),
			HeadersSize: -1, BodySize: 0,
		},
		Response: har.Response{Cookies: []har.Cookie{}, Headers: []har.NameValue{}, HeadersSize: -1, BodySize: -1},
		Cache:    har.Cache{},
		Timings:  har.Timings{Send: 0, Wait: 0, Receive: 0},
	}
	if re.failed != "" {
		e.Comment = "failed: " + re.failed
	}
	if re.endTS > 0 {
		e.Time = (re.endTS.Float64() - re.ts.Float64()) * 1000
	}
	r := re.resp
	if r == nil {
		// No response: a failed or unfinished request.
		e.Response.Content = har.Content{Size: 0, MimeType: "x-unknown"}
		return e, true, nil
	}
	if len(r.RequestHeaders) > 0 {
		e.Request.Headers = headerList(r.RequestHeaders)
	}
	e.Request.HTTPVersion = httpVersionOf(r.Protocol)
	e.Response.Status = int(r.Status)
	e.Response.StatusText = r.StatusText
	e.Response.HTTPVersion = e.Request.HTTPVersion
	e.Response.Headers = headerList(r.Headers)
	e.Response.RedirectURL, _ = har.Header(e.Response.Headers, "location")
	e.ServerIPAddress = r.RemoteIPAddress
	if r.ConnectionID > 0 {
		e.Connection = strconv.FormatInt(int64(r.ConnectionID), 10)
	}
	e.Response.BodySize = int64(re.bodySize)
	e.Timings = timingsOf(r.Timing, re)
	e.Response.Content = har.Content{MimeType: r.MimeType, Size: 0}
	if r.Charset != "" && !strings.Contains(r.MimeType, "charset") {
		e.Response.Content.MimeType += "; charset=" + r.Charset
	}
	if !re.done || re.failed != "" || !e.HasBody() {
		return e, true, nil
	}
	if !bodies {
		e.Response.Content.Size = re.decoded
		e.Response.Content.Comment = "body not kept"
		return e, true, nil
	}
	body, err := chromedp.Run(ctx, func(ctx context.Context, t *chromedp.Target) (network.GetResponseBodyResult, error) {
		return cdp.Call(ctx, t, network.GetResponseBody, network.GetResponseBodyParams{RequestID: re.id})
	})
	if err != nil {
		if ctx.Err() != nil {
			return e, false, fmt.Errorf("browser: record: reading the body of %s: %w", re.req.URL, err)
		}
		// DevTools has no body for it (a redirect's, an evicted one):
		// the entry says so, and a replay reports it as missing.
		e.Comment = strings.TrimSpace(e.Comment + " body unavailable: " + err.Error())
		e.Response.Content.Size = int64(re.bodySize)
		return e, true, nil
	}
	e.Response.Content.SetBody(body.Body)
	if c := int64(re.bodySize); c > 0 && c < e.Response.Content.Size {
		saved := e.Response.Content.Size - c
		e.Response.Content.Compression = &saved
	}
	return e, true, nil
}

// headerList turns DevTools headers (several values of one name joined by
// newlines) into HAR headers, sorted by name.
func headerList(h network.Headers) []har.NameValue {
	out := []har.NameValue{}
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		v := fmt.Sprint(h[k])
		for _, one := range strings.Split(v, "\n") {
			out = append(out, har.NameValue{Name: k, Value: one})
		}
	}
	return out
}

func queryList(u *url.URL) []har.NameValue {
	out := []har.NameValue{}
	q := u.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range q[k] {
			out = append(out, har.NameValue{Name: k, Value: v})
		}
	}
	return out
}

// httpVersionOf writes a DevTools protocol name as HAR's httpVersion (as
// Chrome's own export does).
func httpVersionOf(p string) string {
	switch p {
	case "h2":
		return "http/2.0"
	case "":
		return ""
	}
	return p
}

// timingsOf derives HAR timings (ms) from DevTools' resource timing.
func timingsOf(t *network.ResourceTiming, re *recEntry) har.Timings {
	out := har.Timings{}
	neg := func() *float64 { v := -1.0; return &v }
	val := func(a, b float64) *float64 {
		if a < 0 || b < 0 {
			return neg()
		}
		v := b - a
		return &v
	}
	if t == nil {
		if re.endTS > 0 {
			out.Receive = (re.endTS.Float64() - re.ts.Float64()) * 1000
		}
		return out
	}
	out.Blocked = val(0, firstNonNeg(t.DNSStart, t.ConnectStart, t.SendStart))
	out.DNS = val(t.DNSStart, t.DNSEnd)
	out.Connect = val(t.ConnectStart, t.ConnectEnd)
	out.SSL = val(t.SslStart, t.SslEnd)
	out.Send = math.Max(0, t.SendEnd-t.SendStart)
	out.Wait = math.Max(0, t.ReceiveHeadersEnd-t.SendEnd)
	if re.endTS > 0 {
		out.Receive = math.Max(0, (re.endTS.Float64()-t.RequestTime)*1000-t.ReceiveHeadersEnd)
	}
	return out
}

func firstNonNeg(vs ...float64) float64 {
	for _, v := range vs {
		if v >= 0 {
			return v
		}
	}
	return 0
}
