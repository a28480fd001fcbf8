package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// The browser clients but lighthouse (chromium; firefox) run the tests a
// browser can run beyond page loads (latency, ttfb, download, upload,
// multiplex, stream) in quicbench's bench page: /bench?test=NAME&PARAMS
// of quicbench's server, whose script (endpoint/bench.js) runs the test
// with fetch() once the page has loaded and publishes what it observed as
// the promise window.__qbResult. The part that depends on the browser is
// a BrowserBench: start the browser, navigate, evaluate BenchResultJS,
// close. Everything else is here and the same for every browser: the
// page's URL, the parsing and checking of its result (every request over
// the sample's protocol), and the metrics, computed by the same code as
// the built-in client's (docs/metrics.md says what each includes).

// BrowserBench runs the bench page in a browser: in a fresh isolated
// context of the client agent's running browser (or a fresh browser, per
// req.BrowserRestart) in the client namespace, it navigates a tab to url,
// evaluates BenchResultJS there (awaiting its promise), closes the context
// (on every path), and returns the string the expression returned: the
// page's result as JSON. The browser must use req.Protocol for url's
// origin (h1, h2 or h3 forced, as for page loads) and trust the server's
// certificate (req.Target.SPKI). It should bound its work by req.Timeout.
// An error means the sample failed (the browser did not start, the
// navigation failed, the expression threw); the checks of what the page
// measured are the caller's. The *BrowserReport (nil when the driver has
// none) says what the browser's processes spent on the sample and what
// happened to the browser.
type BrowserBench func(ctx context.Context, req Request, url string) (resultJSON []byte, rep *BrowserReport, err error)

// BrowserStartTimeout bounds the start of a browser the client agent keeps
// across samples, which the sample that needs it waits for before its own
// time limit begins: a start is paid once per testbed, not per sample, and
// on a saturated machine Firefox took more than the 20 s a browser per
// sample is given. The runner waits that much longer for a browser
// client's sample.
const BrowserStartTimeout = 60 * time.Second

// BrowserReport is what a browser driver reports of its browser for one
// sample besides the measurement (docs/metrics.md, "Persistent
// browsers").
type BrowserReport struct {
	// CPU holds the client fields: the CPU time the browser's processes
	// spent on the sample. CPUUnavailable is set when it could not be
	// read.
	CPU            model.CPUUsage
	CPUUnavailable bool
	// Warnings say what happened to the browser: restarted before the
	// sample (and why), failed during it.
	Warnings []string
	// Metrics are the browser's and the agent's resource usage after the
	// sample (browser_rss_mb, browser_pss_mb, browser_fds, browser_age,
	// agent_rss_mb, agent_fds).
	Metrics map[string]float64
}

// BenchResultJS is the expression a BrowserBench evaluates in the bench
// page once navigated: it waits for the page's script to publish its
// result and resolves to that result as a JSON string. It works alike
// over DevTools (chromedp's Evaluate with EvalAwaitPromise) and in
// puppeteer (page.evaluate).
const BenchResultJS = `(async () => {
  for (let i = 0; i < 2000 && !window.__qbResult; i++) await new Promise(r => setTimeout(r, 5));
  if (!window.__qbResult) throw new Error('the bench page published no result (window.__qbResult)');
  return JSON.stringify(await window.__qbResult);
})()`

// benchVersion is the version of the bench page's result format.
const benchVersion = 1

// benchRun is how the browser clients run a test in the bench page.
type benchRun struct {
	// query returns the test's parameters for the page's URL (test= is
	// added): sizes in bytes, intervals as Go durations.
	query func(p plan.Params) url.Values
	// metrics turns what the page observed into the test's metrics, with
	// the names and meanings of the built-in client's. The page's result
	// has been checked for the protocol and its requests have their
	// Resource Timing entries.
	metrics func(b *benchData, p plan.Params, res *Result) error
}

// benchData is the bench page's result (endpoint/bench.js). Times are
// performance.now() values in ms; request times are relative to T0.
type benchData struct {
	Version    int            `json:"version"`
	Test       string         `json:"test"`
	Error      string         `json:"error"`
	Isolated   bool           `json:"isolated"` // self.crossOriginIsolated
	TimerMs    float64        `json:"timer_ms"` // smallest step of performance.now(); -1 if none seen
	TimeOrigin float64        `json:"time_origin"`
	T0         float64        `json:"t0"` // start of the measured part
	T1         float64        `json:"t1"` // its end
	Requests   []benchRequest `json:"requests"`
	Entries    []benchEntry   `json:"entries"`

	want    string                 // expected nextHopProtocol
	byName  map[string]*benchEntry // resource entries by path and query
	navHere *benchEntry
}

// benchRequest is one measured request of the page.
type benchRequest struct {
	Name   string       `json:"name"` // path and query, as fetched
	Start  float64      `json:"start"`
	End    float64      `json:"end"` // the last body byte read (upload: the response read)
	Bytes  int64        `json:"bytes"`
	Upload int64        `json:"upload"`
	Chunks [][2]float64 `json:"chunks"` // [arrival, bytes]
	Server *struct {
		Bytes int64 `json:"bytes"`
		Nanos int64 `json:"nanos"`
	} `json:"server"` // /upload's report
}

// benchEntry is a Resource or Navigation Timing entry (times in ms from
// the time origin).
type benchEntry struct {
	Name                  string  `json:"name"`
	Type                  string  `json:"type"` // navigation or resource
	Protocol              string  `json:"protocol"`
	StartTime             float64 `json:"startTime"`
	ConnectStart          float64 `json:"connectStart"`
	SecureConnectionStart float64 `json:"secureConnectionStart"`
	ConnectEnd            float64 `json:"connectEnd"`
	RequestStart          float64 `json:"requestStart"`
	ResponseStart         float64 `json:"responseStart"`
	ResponseEnd           float64 `json:"responseEnd"`
	EncodedBodySize       float64 `json:"encodedBodySize"`
}

// nextHop is the nextHopProtocol a browser reports for a protocol.
func nextHop(proto string) string {
	switch proto {
	case model.ProtoH1, model.ProtoH1C:
		return "http/1.1"
	case model.ProtoH2:
		return "h2"
	case model.ProtoH3:
		return "h3"
	}
	return ""
}

// httpVersion is model.Negotiated.HTTPVersion for an ALPN id.
func httpVersion(alpn string) string {
	return map[string]string{"http/1.1": "HTTP/1.1", "h2": "HTTP/2.0", "h3": "HTTP/3.0"}[alpn]
}

// BenchURL returns the URL of the bench page that runs req's test, or an
// error when the test has no bench form.
func BenchURL(req Request) (string, error) {
	r, ok := runs[req.Test]
	if !ok || r.bench == nil {
		return "", fmt.Errorf("test %q has no bench page form", req.Test)
	}
	q := r.bench.query(req.Params)
	q.Set("test", req.Test)
	return "https://" + net.JoinHostPort(req.Target.Host, strconv.Itoa(req.Target.Port)) + "/bench?" + q.Encode(), nil
}

// benchSample takes a browser client's sample of a test in the bench page.
func (e *Executor) benchSample(ctx context.Context, req Request, r run, st *peers.Stack, impl ClientImpl) (*Result, error) {
	if r.bench == nil || !plan.IsBenchTest(req.Test) {
		return nil, fmt.Errorf("client %s runs only page and site tests and, in the bench page, latency, ttfb, download, upload, multiplex and stream; not %s", req.Client, req.Test)
	}
	if !slices.Contains(st.Client.Protocols, req.Protocol) {
		return nil, fmt.Errorf("client %s speaks %s, not %s", req.Client, peers.List(st.Client.Protocols), req.Protocol)
	}
	if err := plan.CheckParams(req.Test, req.Params); err != nil {
		return nil, err
	}
	if why := plan.BrowserUnsupported(req.Test, req.Params, req.Client); why != "" {
		return nil, errors.New(why)
	}
	bench := impl.Bench
	if bench == nil {
		return nil, fmt.Errorf("client %s: the bench page cannot run in this agent (no %s driver; see quicbench doctor)", req.Client, req.Client)
	}
	u, err := BenchURL(req)
	if err != nil {
		return nil, err
	}
	cpu0, cpuErr0 := ChildrenCPU()
	start := time.Now()
	data, rep, err := bench(ctx, req, u)
	took := time.Since(start)
	cpu1, cpuErr1 := ChildrenCPU()
	if err != nil {
		res := &Result{Metrics: map[string]float64{}, Prep: took}
		rep.addTo(res)
		return res, err
	}
	res, err := benchResult(data, req, r.bench)
	if res == nil {
		res = &Result{Metrics: map[string]float64{}}
	}
	switch {
	case rep != nil:
		res.CPU.ClientUser, res.CPU.ClientSys = rep.CPU.ClientUser, rep.CPU.ClientSys
		res.ClientCPUUnavailable = rep.CPUUnavailable
	case cpuErr0 == nil && cpuErr1 == nil:
		// A driver without a report ran its browser as a child of this
		// process, reaped within the call.
		res.CPU.ClientUser, res.CPU.ClientSys = cpu1.User-cpu0.User, cpu1.Sys-cpu0.Sys
	default:
		res.ClientCPUUnavailable = true
	}
	rep.addTo(res)
	res.Prep, res.Wall = benchTimes(start, took, res.Prep, res.Wall)
	return res, err
}

// addTo adds the report's warnings and metrics to res (nothing for a nil
// report).
func (rep *BrowserReport) addTo(res *Result) {
	if rep == nil {
		return
	}
	res.Warnings = append(res.Warnings, rep.Warnings...)
	for k, v := range rep.Metrics {
		res.Metrics[k] = v
	}
}

// benchTimes places the page's measured part (which began at measured,
// a time since the Unix epoch passed as a Duration, and lasted wall) in
// the sample that started at start and took took: Prep is the time until
// the measured part began (browser start, navigation, page load), and
// Prep + Wall never exceeds took (the browser's and Go's clocks are the
// same system clock, but only to the browser's timer resolution).
func benchTimes(start time.Time, took, measured, wall time.Duration) (prep, w time.Duration) {
	prep = min(max(time.Duration(measured.Nanoseconds()-start.UnixNano()), 0), took)
	return prep, min(max(wall, 0), took-prep)
}

// ChildrenCPU is the CPU time of this process's waited-for children (in
// the agent, a subreaper: the browser processes of finished samples).
func ChildrenCPU() (endpoint.CPUTime, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return endpoint.CPUTime{}, err
	}
	return endpoint.CPUTime{User: time.Duration(ru.Utime.Nano()), Sys: time.Duration(ru.Stime.Nano())}, nil
}

// benchResult parses and checks the page's result and computes the
// test's metrics. The Result's Prep holds the measured part's start since
// the Unix epoch (benchSample turns it into the preparation) and Wall its
// length. The error is an *InvalidError when the page ran but did not
// measure what was asked (a resource over another protocol, a clock not
// raised to its isolated resolution, a missing timing entry), a plain
// error when the result is malformed or the test failed in the page.
func benchResult(data []byte, req Request, br *benchRun) (*Result, error) {
	var b benchData
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&b); err != nil {
		return nil, fmt.Errorf("bench page result: malformed JSON: %v", err)
	}
	if dec.More() {
		return nil, errors.New("bench page result: malformed JSON: data after the result object")
	}
	if b.Version != benchVersion {
		return nil, fmt.Errorf("bench page result: version %d, want %d (a stale bench page?)", b.Version, benchVersion)
	}
	if b.Test != req.Test {
		return nil, fmt.Errorf("bench page result: the page ran test %q, not %s", b.Test, req.Test)
	}
	b.want = nextHop(req.Protocol)
	res := &Result{Metrics: map[string]float64{}}
	if err := b.index(); err != nil {
		return res, err
	}
	if b.navHere != nil {
		res.Negotiated.ALPN = b.navHere.Protocol
		res.Negotiated.HTTPVersion = httpVersion(b.navHere.Protocol)
	}
	if err := b.checkProtocols(); err != nil {
		return res, err
	}
	if b.Error != "" {
		return res, fmt.Errorf("bench page: %s", b.Error)
	}
	if !b.Isolated {
		return res, &InvalidError{Reason: fmt.Sprintf("the bench page was not cross-origin isolated: the browser's timer was coarsened to %s ms (Cross-Origin-Opener-Policy and -Embedder-Policy headers missing or ignored)", fmtMs(b.TimerMs))}
	}
	if b.TimerMs > 0 {
		res.Metrics["timer_resolution_us"] = math.Round(b.TimerMs*1e6) / 1000
	}
	for _, q := range b.Requests {
		if b.entry(q.Name) == nil {
			return res, &InvalidError{Reason: fmt.Sprintf("no Resource Timing entry for %s: its protocol cannot be checked", q.Name)}
		}
		if q.End < q.Start || q.Start < 0 || q.Bytes < 0 {
			return res, fmt.Errorf("bench page result: request %s: start %s ms, end %s ms, %d bytes", q.Name, fmtMs(q.Start), fmtMs(q.End), q.Bytes)
		}
		res.Bytes += q.Bytes + q.Upload
	}
	if !(b.T1 >= b.T0) || math.IsInf(b.T1, 0) {
		return res, fmt.Errorf("bench page result: measured part from %s to %s ms", fmtMs(b.T0), fmtMs(b.T1))
	}
	res.Prep = time.Duration(msToNs(b.TimeOrigin + b.T0))
	res.Wall = time.Duration(msToNs(b.T1 - b.T0))
	return res, br.metrics(&b, req.Params, res)
}

// index finds the page's own navigation entry and keys the resource
// entries by path and query.
func (b *benchData) index() error {
	b.byName = map[string]*benchEntry{}
	for i := range b.Entries {
		e := &b.Entries[i]
		switch e.Type {
		case "navigation":
			if b.navHere == nil {
				b.navHere = e
			}
		case "resource":
			b.byName[pathOf(e.Name)] = e
		}
	}
	if b.navHere == nil {
		return errors.New("bench page result: no navigation timing entry")
	}
	return nil
}

// entry returns the Resource Timing entry of a request (a path with its
// query, or a URL), nil when there is none.
func (b *benchData) entry(name string) *benchEntry { return b.byName[pathOf(name)] }

// checkProtocols returns an *InvalidError when any entry (the document,
// the page's script, every request) used another protocol than the
// sample's.
func (b *benchData) checkProtocols() error {
	var bad []string
	for _, e := range b.Entries {
		if e.Protocol != b.want {
			got := e.Protocol
			if got == "" {
				got = "no protocol"
			}
			bad = append(bad, pathOf(e.Name)+" used "+got)
		}
	}
	n := len(bad)
	if n == 0 {
		return nil
	}
	const show = 5
	more := ""
	if n > show {
		more = fmt.Sprintf(" and %d more", n-show)
		bad = bad[:show]
	}
	return &InvalidError{Reason: fmt.Sprintf("%d of %d resources did not use %s: %s%s",
		n, len(b.Entries), b.want, strings.Join(bad, ", "), more)}
}

// pathOf is a URL's path and query ("/bytes/1000?qb=0"); a name that is
// no absolute URL is returned as it is.
func pathOf(name string) string {
	u, err := url.Parse(name)
	if err != nil || u.Scheme == "" {
		return name
	}
	p := u.EscapedPath()
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// msToNs converts a time in ms (a DOMHighResTimeStamp) to ns.
func msToNs(ms float64) int64 { return int64(math.Round(ms * 1e6)) }

func fmtMs(ms float64) string { return strconv.FormatFloat(ms, 'g', 6, 64) }

// chunksOf converts a request's chunk record to Chunks in ns from t0.
func chunksOf(q benchRequest) []Chunk {
	out := make([]Chunk, len(q.Chunks))
	for i, c := range q.Chunks {
		out[i] = Chunk{T: msToNs(c[0]), N: int64(c[1])}
	}
	return out
}

// requestsOf returns the page's measured requests, failing when their
// count is not want.
func (b *benchData) requestsOf(want int) ([]benchRequest, error) {
	if len(b.Requests) != want {
		return nil, fmt.Errorf("bench page result: %d measured requests, want %d", len(b.Requests), want)
	}
	return b.Requests, nil
}
