package browser

import (
	"math"
	"net/url"
	"sort"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/quicbench/quicbench/model"
)

// Result is the measurement of one page load. Times are from navigation
// start (performance.timeOrigin); paint times come in the browser's frame
// steps (about 4 ms here).
type Result struct {
	URL      string // the page as requested
	Protocol string // nextHopProtocol every resource had to use: "http/1.1", "h2", "h3"
	Version  string // browser product, e.g. "Chrome/156.0.8078.79"
	Start    time.Time

	TTFB             time.Duration // document responseStart
	DOMContentLoaded time.Duration // domContentLoadedEventEnd
	Load             time.Duration // loadEventEnd
	FCP              time.Duration // first-contentful-paint; 0 when nothing was painted
	LCP              time.Duration // last largest-contentful-paint candidate; 0 when none

	// Resources holds the document first, then every sub-resource in the
	// order it started, with times in ns from navigation start. Bytes is
	// the encoded (on-the-wire) body size. len(Resources) is the resource
	// count.
	Resources     []model.Resource
	TransferBytes int64 // sum of transferSize (body plus Chromium's fixed 300-byte header estimate)
	BodyBytes     int64 // sum of encodedBodySize
	// CachedResources counts resources taken from Chromium's HTTP cache
	// (transferSize 0 with a body): they keep the protocol they were first
	// fetched with. Always 0 with a fresh profile or DisableCache.
	CachedResources int

	// Negotiated describes the document's connection as DevTools reports
	// it: ALPN, HTTP version, TLS version and cipher in Chromium's spelling
	// (e.g. "TLS 1.3", "AES_128_GCM"; for QUIC Chromium reports "QUIC" as
	// the TLS version). QUICVersion, Resumed and ZeroRTT are not exposed by
	// DevTools and stay empty.
	Negotiated model.Negotiated
	// Status is the document's HTTP status code as DevTools reports it (0
	// when unknown). Load does not judge it: an error page is a page too.
	Status int64
	// ConnectionReused is true when the document came over a connection
	// that was already open (a warm Session load).
	ConnectionReused bool

	// Wall is the driver's wall time from sending the navigation until the
	// measurements were read (it includes waiting for paint entries).
	Wall time.Duration
}

// Metrics returns the scalar metrics of the load, by name, for
// model.Sample.Metrics: ttfb_ms, dcl_ms, load_ms (omitted when the load
// event never ended), fcp_ms, lcp_ms (both omitted when the page painted
// nothing), resources, cached_resources, transfer_bytes, body_bytes.
func (r *Result) Metrics() map[string]float64 {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	m := map[string]float64{
		"ttfb_ms":          ms(r.TTFB),
		"dcl_ms":           ms(r.DOMContentLoaded),
		"resources":        float64(len(r.Resources)),
		"cached_resources": float64(r.CachedResources),
		"transfer_bytes":   float64(r.TransferBytes),
		"body_bytes":       float64(r.BodyBytes),
	}
	if r.Load > 0 {
		m["load_ms"] = ms(r.Load)
	}
	if r.FCP > 0 {
		m["fcp_ms"] = ms(r.FCP)
	}
	if r.LCP > 0 {
		m["lcp_ms"] = ms(r.LCP)
	}
	return m
}

// LoadEventWait is how long after the navigation Load waits for the load
// event to end before it reads the page's timings (collectJS: 400 polls 5
// ms apart).
const LoadEventWait = 2 * time.Second

// check returns a *ProtocolMismatchError when any resource used another
// protocol than r.Protocol, else an *IncompleteLoadError when the load
// event never ended.
func (r *Result) check() error {
	if err := r.checkProtocols(); err != nil {
		return err
	}
	if r.Load <= 0 {
		return &IncompleteLoadError{URL: r.URL, Waited: LoadEventWait}
	}
	return nil
}

// checkProtocols returns a *ProtocolMismatchError when any resource used
// another protocol than r.Protocol.
func (r *Result) checkProtocols() error {
	var bad []Mismatch
	for _, res := range r.Resources {
		if res.Protocol != r.Protocol {
			bad = append(bad, Mismatch{Name: res.Name, Got: res.Protocol})
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &ProtocolMismatchError{Want: r.Protocol, Total: len(r.Resources), Mismatches: bad}
}

// rawEntry is a PerformanceResourceTiming or PerformanceNavigationTiming
// entry as collectJS returns it (times in ms from timeOrigin).
type rawEntry struct {
	Name            string  `json:"name"`
	Protocol        string  `json:"nextHopProtocol"`
	StartTime       float64 `json:"startTime"`
	ResponseStart   float64 `json:"responseStart"`
	ResponseEnd     float64 `json:"responseEnd"`
	TransferSize    float64 `json:"transferSize"`
	EncodedBodySize float64 `json:"encodedBodySize"`
	DCL             float64 `json:"domContentLoadedEventEnd"`
	Load            float64 `json:"loadEventEnd"`
}

// rawResult is what collectJS returns.
type rawResult struct {
	TimeOrigin float64    `json:"timeOrigin"` // ms since the Unix epoch
	URL        string     `json:"url"`        // document URL after redirects
	Nav        *rawEntry  `json:"nav"`        // nil when the page has no navigation entry
	Resources  []rawEntry `json:"resources"`
	FCP        float64    `json:"fcp"` // -1 when none
	LCP        float64    `json:"lcp"` // -1 when none
}

// collectJS waits until the load event has ended and the first contentful
// paint has happened (bounded), lets buffered largest-contentful-paint
// entries arrive, and returns the page's timing entries.
const collectJS = `(async () => {
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const navEntry = () => performance.getEntriesByType('navigation')[0];
  for (let i = 0; i < 400 && !(navEntry() && navEntry().loadEventEnd > 0); i++) await sleep(5);
  const fcpEntry = () => performance.getEntriesByName('first-contentful-paint')[0];
  for (let i = 0; i < 200 && !fcpEntry(); i++) await sleep(5);
  const lcp = await new Promise(resolve => {
    let last = null, done = false;
    const po = new PerformanceObserver(list => { for (const e of list.getEntries()) last = e; });
    const finish = () => {
      if (done) return;
      done = true;
      for (const e of po.takeRecords()) last = e;
      po.disconnect();
      resolve(last ? last.startTime : -1);
    };
    try { po.observe({type: 'largest-contentful-paint', buffered: true}); } catch (e) { resolve(-1); return; }
    requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(finish, 0)));
    setTimeout(finish, 500);
  });
  const pick = e => ({
    name: e.name, nextHopProtocol: e.nextHopProtocol, startTime: e.startTime,
    responseStart: e.responseStart, responseEnd: e.responseEnd,
    transferSize: e.transferSize, encodedBodySize: e.encodedBodySize,
    domContentLoadedEventEnd: e.domContentLoadedEventEnd || 0, loadEventEnd: e.loadEventEnd || 0,
  });
  const nav = navEntry();
  const fcp = fcpEntry();
  return {
    timeOrigin: performance.timeOrigin,
    url: document.URL,
    nav: nav ? pick(nav) : null,
    resources: performance.getEntriesByType('resource').map(pick),
    fcp: fcp ? fcp.startTime : -1,
    lcp: lcp,
  };
})()`

// msToNs converts a DOMHighResTimeStamp in ms to integer ns.
func msToNs(ms float64) int64 { return int64(math.Round(ms * 1e6)) }

// result converts the raw entries into a Result. want is the expected
// nextHopProtocol; resp is the document's response from DevTools (may be
// nil). raw.Nav must not be nil.
func (raw *rawResult) result(want string, resp *network.Response) *Result {
	base, _ := url.Parse(raw.URL)
	res := &Result{
		URL:              raw.URL,
		Protocol:         want,
		Start:            time.UnixMicro(int64(math.Round(raw.TimeOrigin * 1e3))),
		TTFB:             time.Duration(msToNs(raw.Nav.ResponseStart - raw.Nav.StartTime)),
		DOMContentLoaded: time.Duration(msToNs(raw.Nav.DCL)),
		Load:             time.Duration(msToNs(raw.Nav.Load)),
	}
	if raw.FCP > 0 {
		res.FCP = time.Duration(msToNs(raw.FCP))
	}
	if raw.LCP > 0 {
		res.LCP = time.Duration(msToNs(raw.LCP))
	}
	entry := func(e rawEntry) model.Resource {
		return model.Resource{
			Name:     resourceName(base, e.Name),
			Protocol: e.Protocol,
			Start:    msToNs(e.StartTime),
			TTFB:     msToNs(e.ResponseStart),
			End:      msToNs(e.ResponseEnd),
			Bytes:    int64(e.EncodedBodySize),
		}
	}
	subs := make([]model.Resource, 0, len(raw.Resources))
	for _, e := range raw.Resources {
		subs = append(subs, entry(e))
		if e.TransferSize == 0 && e.EncodedBodySize > 0 {
			res.CachedResources++
		}
		res.TransferBytes += int64(e.TransferSize)
		res.BodyBytes += int64(e.EncodedBodySize)
	}
	sort.SliceStable(subs, func(i, j int) bool { return subs[i].Start < subs[j].Start })
	res.Resources = append([]model.Resource{entry(*raw.Nav)}, subs...)
	res.TransferBytes += int64(raw.Nav.TransferSize)
	res.BodyBytes += int64(raw.Nav.EncodedBodySize)
	if resp != nil {
		res.Negotiated.ALPN = resp.Protocol
		res.Negotiated.HTTPVersion = HTTPVersion(resp.Protocol)
		if sd := resp.SecurityDetails; sd != nil {
			res.Negotiated.TLSVersion = sd.Protocol
			res.Negotiated.Cipher = sd.Cipher
		}
		res.ConnectionReused = resp.ConnectionReused
		res.Status = resp.Status
	}
	return res
}

// resourceName is the URL path (with query) for a resource of the page's
// own origin, the full URL for any other.
func resourceName(base *url.URL, name string) string {
	u, err := url.Parse(name)
	if err != nil || base == nil || u.Scheme != base.Scheme || u.Host != base.Host {
		return name
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}
