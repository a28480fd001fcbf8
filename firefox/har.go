package firefox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/har"
)

// event hands an event message to the subscriber, if any.
func (c *bidiConn) event(typ string, data []byte) {
	if typ != "event" {
		return
	}
	c.mu.Lock()
	fn := c.events
	c.mu.Unlock()
	if fn == nil {
		return
	}
	var ev struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(data, &ev) == nil {
		fn(ev.Method, ev.Params)
	}
}

// setEvents sets the subscriber of events (nil: none).
func (c *bidiConn) setEvents(fn func(method string, params json.RawMessage)) {
	c.mu.Lock()
	c.events = fn
	c.mu.Unlock()
}

// BiDi network event payloads (WebDriver BiDi, "network" module), the
// fields a HAR needs.
type (
	bidiHeader struct {
		Name  string `json:"name"`
		Value struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"value"`
	}
	bidiTimings struct {
		TimeOrigin, RequestTime, FetchStart, DNSStart, DNSEnd, ConnectStart, ConnectEnd,
		TLSStart, TLSEnd, RequestStart, ResponseStart, ResponseEnd float64
	}
	bidiRequest struct {
		Request string       `json:"request"`
		URL     string       `json:"url"`
		Method  string       `json:"method"`
		Headers []bidiHeader `json:"headers"`
		Timings bidiTimings  `json:"timings"`
	}
	bidiResponse struct {
		URL        string       `json:"url"`
		Protocol   string       `json:"protocol"`
		Status     int          `json:"status"`
		StatusText string       `json:"statusText"`
		FromCache  bool         `json:"fromCache"`
		Headers    []bidiHeader `json:"headers"`
		MimeType   string       `json:"mimeType"`
		BodySize   *int64       `json:"bodySize"`
		Content    struct {
			Size int64 `json:"size"`
		} `json:"content"`
	}
	bidiNetEvent struct {
		Context       string        `json:"context"`
		RedirectCount int           `json:"redirectCount"`
		Request       bidiRequest   `json:"request"`
		Response      *bidiResponse `json:"response"`
		Timestamp     float64       `json:"timestamp"` // ms since the epoch
		ErrorText     string        `json:"errorText"`
	}
)

// netLog collects a load's network events.
type netLog struct {
	mu       sync.Mutex
	entries  []*netEntry
	byKey    map[string]*netEntry // request id and redirect count
	inflight int
}

type netEntry struct {
	sent    bidiNetEvent
	done    *bidiNetEvent
	failed  string
	started time.Time
}

func (l *netLog) event(method string, params json.RawMessage) {
	var ev bidiNetEvent
	if json.Unmarshal(params, &ev) != nil {
		return
	}
	key := fmt.Sprintf("%s/%d", ev.Request.Request, ev.RedirectCount)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch method {
	case "network.beforeRequestSent":
		e := &netEntry{sent: ev, started: time.UnixMicro(int64(math.Round(ev.Timestamp * 1000)))}
		l.entries = append(l.entries, e)
		l.byKey[key] = e
		l.inflight++
	case "network.responseCompleted", "network.fetchError":
		e := l.byKey[key]
		if e == nil || e.done != nil || e.failed != "" {
			return
		}
		if method == "network.fetchError" {
			e.failed = ev.ErrorText
		} else {
			e.done = &ev
		}
		l.inflight--
	}
}

// settle waits until no request is in flight, for at most d.
func (l *netLog) settle(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		n := l.inflight
		l.mu.Unlock()
		if n <= 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// harEntries turns the log into HAR entries (without bodies: BiDi gives
// their sizes).
func (l *netLog) harEntries() []har.Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []har.Entry
	for _, ne := range l.entries {
		rq := ne.sent.Request
		u, err := url.Parse(rq.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
			continue
		}
		e := har.Entry{
			Pageref:         "page_1",
			StartedDateTime: har.Time(ne.started),
			Request: har.Request{Method: rq.Method, URL: rq.URL, Cookies: []har.Cookie{}, Headers: bidiHeaders(rq.Headers),
				QueryString: []har.NameValue{}, HeadersSize: -1, BodySize: 0},
			Response: har.Response{Cookies: []har.Cookie{}, Headers: []har.NameValue{}, HeadersSize: -1, BodySize: -1,
				Content: har.Content{MimeType: "x-unknown"}},
		}
		for k, vs := range u.Query() {
			for _, v := range vs {
				e.Request.QueryString = append(e.Request.QueryString, har.NameValue{Name: k, Value: v})
			}
		}
		sort.Slice(e.Request.QueryString, func(i, j int) bool { return e.Request.QueryString[i].Name < e.Request.QueryString[j].Name })
		if ne.failed != "" {
			e.Comment = "failed: " + ne.failed
		}
		if d := ne.done; d != nil && d.Response != nil {
			r := d.Response
			e.Request.HTTPVersion = r.Protocol
			e.Response.HTTPVersion = r.Protocol
			e.Response.Status, e.Response.StatusText = r.Status, r.StatusText
			e.Response.Headers = bidiHeaders(r.Headers)
			e.Response.RedirectURL, _ = har.Header(e.Response.Headers, "location")
			e.Response.Content = har.Content{Size: r.Content.Size, MimeType: r.MimeType, Comment: "body not kept"}
			if r.BodySize != nil {
				e.Response.BodySize = *r.BodySize
				if e.Response.Content.Size <= 0 {
					// Firefox leaves content.size 0: the body's size on
					// the wire is what it gives.
					e.Response.Content.Size = *r.BodySize
				}
			}
			if r.FromCache {
				e.Comment = "from the browser's cache"
			}
			e.Timings = bidiHARTimings(d.Request.Timings)
			e.Time = d.Timestamp - ne.sent.Timestamp
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StartedDateTime < out[j].StartedDateTime })
	return out
}

func bidiHeaders(hs []bidiHeader) []har.NameValue {
	out := []har.NameValue{}
	for _, h := range hs {
		out = append(out, har.NameValue{Name: h.Name, Value: h.Value.Value})
	}
	return out
}

// bidiHARTimings derives HAR timings (ms) from BiDi's fetch timings (ms
// from the time origin; 0 for a phase that did not happen).
func bidiHARTimings(t bidiTimings) har.Timings {
	phase := func(a, b float64) *float64 {
		v := -1.0
		if a > 0 && b >= a {
			v = b - a
		}
		return &v
	}
	tlsEnd := t.TLSEnd
	if tlsEnd == 0 {
		tlsEnd = t.ConnectEnd
	}
	out := har.Timings{DNS: phase(t.DNSStart, t.DNSEnd), SSL: phase(t.TLSStart, tlsEnd)}
	out.Connect = phase(t.ConnectStart, t.ConnectEnd)
	if start := math.Max(t.RequestTime, t.FetchStart); start > 0 {
		first := t.RequestStart
		for _, v := range []float64{t.DNSStart, t.ConnectStart} {
			if v > 0 && v < first {
				first = v
			}
		}
		b := math.Max(0, first-start)
		out.Blocked = &b
	}
	if t.ResponseStart > 0 && t.RequestStart > 0 {
		out.Wait = math.Max(0, t.ResponseStart-t.RequestStart)
	}
	if t.ResponseEnd > 0 && t.ResponseStart > 0 {
		out.Receive = math.Max(0, t.ResponseEnd-t.ResponseStart)
	}
	return out
}

// LoadHAR starts Firefox with a fresh profile, loads opts.URL once as Load
// does, and returns with the load's Result its HAR (Session.LoadHAR).
func LoadHAR(ctx context.Context, opts Options) (*browser.Result, *har.HAR, error) {
	type both struct {
		r *browser.Result
		h *har.HAR
	}
	b, err := once(ctx, opts, func(s *Session, u string) (both, error) {
		r, h, err := s.LoadHAR(ctx, u, false)
		return both{r, h}, err
	})
	return b.r, b.h, err
}

// LoadHAR is Load, also recording the load as a HAR 1.2 archive from
// WebDriver BiDi's network events: every request with its headers,
// status, timings and sizes (no bodies), each entry's response
// httpVersion the protocol the load's check read for it (as
// browser.MarkChecked writes it). It returns Load's error. Firefox's
// network events carry no bodies: bodies must be false (it has the
// signature of browser.Session.LoadHAR).
func (s *Session) LoadHAR(ctx context.Context, pageURL string, bodies bool) (*browser.Result, *har.HAR, error) {
	if bodies {
		return nil, nil, &OptionError{Field: "bodies", Err: errors.New("the network events of Firefox carry no response bodies")}
	}
	log := &netLog{byKey: map[string]*netEntry{}}
	s.bidi.setEvents(log.event)
	defer s.bidi.setEvents(nil)
	var sub struct {
		Subscription string `json:"subscription"`
	}
	events := []string{"network.beforeRequestSent", "network.responseCompleted", "network.fetchError"}
	if err := s.bidi.call(ctx, "session.subscribe", map[string]any{"events": events, "contexts": []string{s.context}}, &sub); err != nil {
		return nil, nil, fmt.Errorf("firefox: subscribing to network events: %w", err)
	}
	res, lerr := s.Load(ctx, pageURL)
	log.settle(browser.LoadEventWait)
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if sub.Subscription != "" {
		_ = s.bidi.call(uctx, "session.unsubscribe", map[string]any{"subscriptions": []string{sub.Subscription}}, nil)
	} else {
		_ = s.bidi.call(uctx, "session.unsubscribe", map[string]any{"events": events, "contexts": []string{s.context}}, nil)
	}
	cancel()
	h := &har.HAR{Log: har.Log{
		Version: "1.2",
		Creator: har.Creator{Name: "quicbench", Version: "load"},
		Browser: &har.Creator{Name: "Firefox", Version: s.version},
		Pages:   []har.Page{{ID: "page_1", Title: pageURL}},
		Entries: log.harEntries(),
	}}
	if len(h.Log.Entries) > 0 {
		h.Log.Pages[0].StartedDateTime = h.Log.Entries[0].StartedDateTime
	}
	browser.MarkChecked(h, res)
	return res, h, lerr
}
