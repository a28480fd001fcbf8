// Package workload implements quicbench's tests: latency, ttfb, handshake,
// download, upload, multiplex, stream, page, site and cpu. A test runs on
// the client side (inside the client namespace, in the client agent
// process): Execute takes one Request, drives the built-in client
// (package endpoint) or headless Chromium (package browser), and turns what
// they recorded into the metrics of docs/metrics.md.
package workload

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// Test names (defined with the plan format, which validates them).
const (
	TestLatency   = plan.TestLatency
	TestTTFB      = plan.TestTTFB
	TestHandshake = plan.TestHandshake
	TestDownload  = plan.TestDownload
	TestUpload    = plan.TestUpload
	TestMultiplex = plan.TestMultiplex
	TestStream    = plan.TestStream
	TestPage      = plan.TestPage
	TestSite      = plan.TestSite
	TestCPU       = plan.TestCPU
)

// Tests lists every test in documentation order.
var Tests = []string{TestLatency, TestTTFB, TestHandshake, TestDownload, TestUpload,
	TestMultiplex, TestStream, TestPage, TestSite, TestCPU}

// Connection kinds of the page and site tests (their connection parameter).
const (
	// ConnCold: the sample starts from nothing (the default).
	ConnCold = plan.ConnCold
	// ConnWarm: the measured load runs over connections the same sample
	// established and used before.
	ConnWarm = plan.ConnWarm
)

// HOLBin is the width of the bins of the head-of-line timelines.
const HOLBin = 10 * time.Millisecond

// CPUSampleInterval is the period of the CPU timelines of the cpu test.
const CPUSampleInterval = 100 * time.Millisecond

// Target is where the server listens, as its ready line announced.
type Target struct {
	Host      string `json:"host"`       // server IP address
	Port      int    `json:"port"`       // TLS port (TCP and UDP)
	PlainPort int    `json:"plain_port"` // cleartext HTTP/1.1 port
	CAPEM     string `json:"ca_pem"`     // CA that issued the server certificate
	SPKI      string `json:"spki"`       // base64 SHA-256 of the leaf's SubjectPublicKeyInfo
}

// Request is one sample to take.
type Request struct {
	Test     string            `json:"test"`
	Protocol string            `json:"protocol"`
	Client   string            `json:"client"` // model.ClientBuiltin (default), model.ClientChromium or model.ClientLighthouse
	Params   map[string]string `json:"params"` // the cell's factors (test parameters and grid coordinates)
	CC       string            `json:"cc"`     // TCP congestion control for the client's sockets ("" = namespace default)
	// QUICEvents turns on quic-go's per-packet event tracing, which yields
	// the PTO count, congestion events and retransmissions of QUIC
	// connections but costs quic-go 20-35% more CPU per MB; off by default
	// so that QUIC is not handicapped against TCP, whose TCP_INFO is free.
	QUICEvents bool          `json:"quic_events"`
	Target     Target        `json:"target"`
	Timeout    time.Duration `json:"timeout"` // whole sample; 0 = endpoint default
}

// Connection returns the connection parameter of a page or site request:
// ConnCold (also when the parameter is absent) or ConnWarm.
func (r *Request) Connection() (string, error) {
	switch v := params(r.Params).str("connection", ConnCold); v {
	case ConnCold, ConnWarm:
		return v, nil
	default:
		return "", fmt.Errorf("connection %q: want %s or %s", v, ConnCold, ConnWarm)
	}
}

// Result is what one sample measured on the client side. The runner adds
// the server's CPU time, the link counters and validity warnings.
type Result struct {
	Status     model.Status           `json:"status"`
	Error      string                 `json:"error,omitempty"`
	Metrics    map[string]float64     `json:"metrics"`
	Negotiated model.Negotiated       `json:"negotiated"`
	Transport  []model.TransportStats `json:"transport,omitempty"`
	Conns      []endpoint.ConnRef     `json:"conns,omitempty"` // for server-side statistics
	CPU        model.CPUUsage         `json:"cpu"`             // client fields only
	Bytes      int64                  `json:"bytes"`           // application bytes moved (both directions)
	Wall       time.Duration          `json:"wall"`            // measured part
	Timelines  []model.Series         `json:"timelines,omitempty"`
	Resources  []model.Resource       `json:"resources,omitempty"`
	// Prep is the unmeasured preparation inside the client before the
	// measured part: the warm-up connections and their unmeasured request
	// (latency; page and site with connection warm), the priming connection
	// that fetches the session ticket (handshake resumed and 0rtt), the
	// browser's start (Chromium) and its priming load (Chromium with
	// connection warm). 0 when nothing precedes the measured part; when the
	// preparation fails, the time it took until it failed. Wall + Prep
	// never exceeds the time the client spent on the sample.
	Prep time.Duration `json:"prep"`
}

// BrowserLoader loads a page in a real browser. The agent sets it when
// Chromium is available; Execute fails client=chromium samples without it.
type BrowserLoader func(ctx context.Context, req Request, url string) (*Result, error)

// Executor runs tests. The zero value runs built-in client tests only.
type Executor struct {
	// Browser takes the client=chromium samples.
	Browser BrowserLoader
	// Lighthouse takes the client=lighthouse samples: Lighthouse audits
	// the page in a browser of its own.
	Lighthouse BrowserLoader
	// Now and Sleep are the clock of the CPU sampler (tests inject fakes).
	Now func() time.Time
}

// Execute takes one sample. It never returns a nil Result: failures are
// reported in Status and Error.
func (e *Executor) Execute(ctx context.Context, req Request) *Result {
	res, err := e.execute(ctx, req)
	if res == nil {
		res = &Result{}
	}
	if res.Metrics == nil {
		res.Metrics = map[string]float64{}
	}
	if err != nil {
		res.Error = err.Error()
		var mm *endpoint.MismatchError
		if errors.As(err, &mm) || errors.As(err, new(*InvalidError)) {
			res.Status = model.StatusInvalid
		} else {
			res.Status = model.StatusFailed
		}
		return res
	}
	res.Status = model.StatusOK
	return res
}

// InvalidError marks a sample that completed but did not measure what was
// asked (e.g. a resumed handshake that did not resume).
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "invalid sample: " + e.Reason }

func (e *Executor) execute(ctx context.Context, req Request) (*Result, error) {
	if !slices.Contains(Tests, req.Test) {
		return nil, fmt.Errorf("unknown test %q", req.Test)
	}
	if !slices.Contains(model.Protocols, req.Protocol) {
		return nil, fmt.Errorf("unknown protocol %q", req.Protocol)
	}
	p := params(req.Params)
	if model.IsBrowser(req.Client) {
		return e.browserSample(ctx, req, p)
	}
	spec, err := baseSpec(req)
	if err != nil {
		return nil, err
	}
	switch req.Test {
	case TestLatency:
		return latency(ctx, spec, p)
	case TestTTFB:
		return ttfb(ctx, spec, p)
	case TestHandshake:
		return handshake(ctx, spec, p)
	case TestDownload:
		return download(ctx, spec, p)
	case TestUpload:
		return upload(ctx, spec, p)
	case TestMultiplex:
		return multiplex(ctx, spec, p)
	case TestStream:
		return stream(ctx, spec, p)
	case TestPage:
		n, s := p.int("objects", 10), p.str("size", "8KB")
		spec.Paths = []string{fmt.Sprintf("/page/%d/%s", n, url.PathEscape(s))}
		return page(ctx, spec, req)
	case TestSite:
		spec.Paths = []string{sitePath(p)}
		return page(ctx, spec, req)
	case TestCPU:
		return e.cpu(ctx, spec, p)
	}
	return nil, fmt.Errorf("test %q has no implementation", req.Test)
}

// sitePath is the URL of a site's start page: its directory (the file
// server redirects .../index.html to it, which would cost a round trip).
func sitePath(p params) string {
	return "/site/" + url.PathEscape(p.str("site", "site-39x3mb")) + "/"
}

func baseSpec(req Request) (endpoint.FetchSpec, error) {
	t := req.Target
	if net.ParseIP(t.Host) == nil {
		return endpoint.FetchSpec{}, fmt.Errorf("target host %q is not an IP address", t.Host)
	}
	port := t.Port
	if req.Protocol == model.ProtoH1C {
		port = t.PlainPort
	}
	if port <= 0 {
		return endpoint.FetchSpec{}, fmt.Errorf("no server port for %s", req.Protocol)
	}
	spec := endpoint.FetchSpec{
		Proto:             req.Protocol,
		Addr:              net.JoinHostPort(t.Host, strconv.Itoa(port)),
		Timeout:           req.Timeout,
		CongestionControl: req.CC,
		NoQUICEvents:      !req.QUICEvents,
	}
	if t.CAPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.CAPEM)) {
			return spec, errors.New("target CA: no certificate in PEM")
		}
		spec.RootCAs = pool
	}
	return spec, nil
}

// params reads test parameters with defaults.
type params map[string]string

func (p params) str(name, def string) string {
	if v, ok := p[name]; ok && v != "" {
		return v
	}
	return def
}

func (p params) int(name string, def int) int {
	if v, ok := p[name]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func (p params) size(name string, def int64) (int64, error) {
	v, ok := p[name]
	if !ok || v == "" {
		return def, nil
	}
	n, err := content.ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %w", name, err)
	}
	return n, nil
}

func (p params) duration(name string, def time.Duration) (time.Duration, error) {
	v, ok := p[name]
	if !ok || v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("parameter %s: %w", name, err)
	}
	return d, nil
}

// fetch runs spec and fills the parts of a Result common to every test.
func fetch(ctx context.Context, spec endpoint.FetchSpec) (*endpoint.FetchResult, *Result, error) {
	start := time.Now()
	fr, err := endpoint.Fetch(ctx, spec)
	took := time.Since(start)
	res := &Result{Metrics: map[string]float64{}}
	if fr != nil {
		res.Negotiated = fr.Negotiated
		res.Transport = fr.Transport()
		res.Conns = fr.ConnRefs()
		res.CPU = fr.CPU
		res.Bytes = fr.Bytes + fr.UploadBytes
		res.Wall = time.Duration(fr.MeasureEnd - fr.MeasureStart)
		res.Prep = prepOf(spec, fr, took)
		if len(fr.Conns) > 0 {
			res.Metrics["connections"] = float64(len(fr.Conns))
		}
		for _, c := range fr.Transport() {
			res.Metrics["retransmits"] += float64(c.Retransmits)
		}
	}
	if err != nil {
		return fr, res, err
	}
	if len(fr.Requests) == 0 {
		return fr, res, errors.New("fetch returned no requests")
	}
	return fr, res, nil
}

// prepOf is the unmeasured preparation of a fetch of spec that took took
// (Result.Prep): the time from the fetch's start to its measured part when
// spec warms connections up or primes a session ticket first, 0 when the
// measured part is the first thing the fetch does. A preparation that
// failed (the measured part never started) counts until the fetch gave up.
func prepOf(spec endpoint.FetchSpec, fr *endpoint.FetchResult, took time.Duration) time.Duration {
	if !spec.Warm && !spec.Resume && !spec.ZeroRTT {
		return 0
	}
	if fr.MeasureEnd == 0 {
		return took
	}
	return time.Duration(fr.MeasureStart)
}

// connOf returns the connection record of a request.
func connOf(fr *endpoint.FetchResult, r endpoint.RequestTiming) (endpoint.ConnTiming, bool) {
	if r.Conn < 0 || r.Conn >= len(fr.Conns) {
		return endpoint.ConnTiming{}, false
	}
	return fr.Conns[r.Conn], true
}

func latency(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	n := p.int("requests", 20)
	size, err := p.size("size", 0)
	if err != nil {
		return nil, err
	}
	spec.Paths = []string{"/echo"}
	if size > 0 {
		spec.Paths = []string{fmt.Sprintf("/bytes/%d", size)}
	}
	spec.Repeat, spec.Warm = n, true
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	lat := make([]float64, 0, len(fr.Requests))
	for _, r := range fr.Requests {
		lat = append(lat, Ms(r.End-r.Start))
	}
	sorted := append([]float64(nil), lat...)
	sort.Float64s(sorted)
	var sum float64
	for _, v := range lat {
		sum += v
	}
	res.Metrics["latency_ms"] = sum / float64(len(lat))
	res.Metrics["latency_p50_ms"] = NearestRank(sorted, 0.5)
	res.Metrics["latency_p95_ms"] = NearestRank(sorted, 0.95)
	res.Metrics["latency_max_ms"] = sorted[len(sorted)-1]
	res.Metrics["jitter_ms"] = Jitter(lat)
	res.Metrics["requests"] = float64(len(lat))
	pts := make([]model.Point, len(fr.Requests))
	for i, r := range fr.Requests {
		pts[i] = model.Point{T: r.Start, V: lat[i]}
	}
	res.Timelines = append(res.Timelines, model.Series{Kind: "latency", Label: "request latency (ms)", Points: pts})
	return res, nil
}

// connectMetrics records the connection phases of the first measured
// connection: connect_ms (TCP connect or QUIC usable), handshake_ms
// (TLS/QUIC handshake complete) and ttfb_ms of the first request.
func connectMetrics(fr *endpoint.FetchResult, res *Result) {
	r := fr.Requests[0]
	c, ok := connOf(fr, r)
	if !ok {
		return
	}
	if c.Connected > 0 {
		res.Metrics["connect_ms"] = Ms(c.Connected - c.Start)
	}
	switch {
	case c.Handshake > 0:
		res.Metrics["handshake_ms"] = Ms(c.Handshake - c.Start)
	case c.Connected > 0: // h1c: the TCP handshake is the whole handshake
		res.Metrics["handshake_ms"] = Ms(c.Connected - c.Start)
	}
	if r.FirstByte > 0 {
		res.Metrics["ttfb_ms"] = Ms(r.FirstByte - c.Start)
	}
}

// fetchBytes fetches /bytes/N, N from the size parameter, on a fresh
// connection and records the connection phases.
func fetchBytes(ctx context.Context, spec endpoint.FetchSpec, p params, def int64) (*endpoint.FetchResult, *Result, int64, error) {
	size, err := p.size("size", def)
	if err != nil {
		return nil, nil, 0, err
	}
	spec.Paths = []string{fmt.Sprintf("/bytes/%d", size)}
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return fr, res, size, err
	}
	connectMetrics(fr, res)
	return fr, res, size, nil
}

func ttfb(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	_, res, _, err := fetchBytes(ctx, spec, p, 1000)
	if err != nil {
		return res, err
	}
	if _, ok := res.Metrics["ttfb_ms"]; !ok {
		return res, errors.New("no first byte recorded")
	}
	return res, nil
}

func handshake(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	mode := p.str("mode", "full")
	spec.Paths = []string{"/echo"}
	switch mode {
	case "full":
	case "resumed":
		spec.Resume = true
	case "0rtt":
		spec.ZeroRTT = true
	default:
		return nil, fmt.Errorf("handshake mode %q: want full, resumed or 0rtt", mode)
	}
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	connectMetrics(fr, res)
	if mode == "0rtt" {
		// With 0-RTT the request leaves before the handshake completes: the
		// time until the connection can carry data is the connect time.
		res.Metrics["handshake_ms"] = res.Metrics["connect_ms"]
	}
	switch {
	case mode != "full" && !res.Negotiated.Resumed:
		return res, &InvalidError{Reason: "the server did not resume the TLS session"}
	case mode == "0rtt" && !res.Negotiated.ZeroRTT:
		return res, &InvalidError{Reason: "the server did not accept 0-RTT"}
	case mode == "full" && res.Negotiated.Resumed:
		return res, &InvalidError{Reason: "a fresh connection resumed a session"}
	}
	return res, nil
}

func download(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	fr, res, size, err := fetchBytes(ctx, spec, p, 1_000_000)
	if err != nil {
		return res, err
	}
	r := fr.Requests[0]
	if r.Bytes != size {
		return res, fmt.Errorf("received %d bytes, want %d", r.Bytes, size)
	}
	c, _ := connOf(fr, r)
	res.Metrics["completion_ms"] = Ms(r.End - c.Start)
	res.Metrics["transfer_ms"] = Ms(r.End - r.Sent)
	res.Metrics["goodput_mbps"] = GoodputMbps(r.Bytes, time.Duration(r.End-r.Sent))
	res.Metrics["bytes"] = float64(r.Bytes)
	return res, nil
}

func upload(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	size, err := p.size("size", 1_000_000)
	if err != nil {
		return nil, err
	}
	spec.Paths, spec.Upload = []string{"/upload"}, size
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	connectMetrics(fr, res)
	delete(res.Metrics, "ttfb_ms")
	r := fr.Requests[0]
	if r.UploadBytes != size {
		return res, fmt.Errorf("sent %d bytes, want %d", r.UploadBytes, size)
	}
	c, _ := connOf(fr, r)
	res.Metrics["completion_ms"] = Ms(r.End - c.Start)
	res.Metrics["transfer_ms"] = Ms(r.End - r.Start)
	res.Metrics["goodput_mbps"] = GoodputMbps(size, time.Duration(r.End-r.Start))
	if r.ServerUploadNanos > 0 {
		res.Metrics["server_receive_ms"] = Ms(r.ServerUploadNanos)
	}
	res.Metrics["bytes"] = float64(size)
	return res, nil
}

func multiplex(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	n := p.int("objects", 10)
	size, err := p.size("size", 100_000)
	if err != nil {
		return nil, err
	}
	spec.Paths = make([]string, n)
	for i := range spec.Paths {
		// distinct paths (a query string the server ignores) keep every
		// request a separate resource, as a page's objects are
		spec.Paths[i] = fmt.Sprintf("/bytes/%d?object=%d", size, i)
	}
	spec.Parallel = n
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	starts := make([]int64, len(fr.Requests))
	ends := make([]int64, len(fr.Requests))
	finish := make([]float64, len(fr.Requests))
	for i, r := range fr.Requests {
		starts[i], ends[i] = r.Start, r.End
		finish[i] = Ms(r.End)
		chunks := make([]Chunk, len(r.Chunks))
		for j, c := range r.Chunks {
			chunks[j] = Chunk{T: c.T, N: int64(c.Bytes)}
		}
		res.Timelines = append(res.Timelines, model.Series{
			Kind: model.SeriesHOL, Label: fmt.Sprintf("stream %d", i), Points: Bins(chunks, int64(HOLBin)),
		})
	}
	sort.Float64s(finish)
	res.Metrics["span_ms"] = Ms(Span(starts, ends))
	res.Metrics["finish_p50_ms"] = NearestRank(finish, 0.5)
	res.Metrics["finish_first_ms"] = finish[0]
	res.Metrics["finish_last_ms"] = finish[len(finish)-1]
	res.Metrics["objects"] = float64(n)
	stalls := 0
	for _, s := range res.Timelines {
		stalls += EmptyBinsInside(s.Points)
	}
	res.Metrics["hol_empty_bins"] = float64(stalls)
	return res, nil
}

func stream(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	segs := p.int("segments", 20)
	interval, err := p.duration("interval", 50*time.Millisecond)
	if err != nil {
		return nil, err
	}
	size, err := p.size("size", 16_000)
	if err != nil {
		return nil, err
	}
	spec.Paths = []string{fmt.Sprintf("/stream?segments=%d&interval=%s&size=%d", segs, interval, size)}
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	r := fr.Requests[0]
	if r.Bytes != int64(segs)*size {
		return res, fmt.Errorf("received %d bytes, want %d segments of %d", r.Bytes, segs, size)
	}
	arrivals := SegmentArrivals(r.Chunks, size, segs)
	st := Intervals(arrivals, 2*interval)
	res.Metrics["interval_p50_ms"] = st.P50
	res.Metrics["interval_p95_ms"] = st.P95
	res.Metrics["interval_max_ms"] = st.Max
	res.Metrics["stalls"] = float64(st.Stalls)
	res.Metrics["segments"] = float64(segs)
	pts := make([]model.Point, len(st.Intervals))
	for i, v := range st.Intervals {
		pts[i] = model.Point{T: arrivals[i+1], V: v}
	}
	res.Timelines = append(res.Timelines, model.Series{Kind: model.SeriesInterval, Label: "segment inter-arrival (ms)", Points: pts})
	res.Timelines = append(res.Timelines, fr.ChunkSeries()...)
	return res, nil
}

// SegmentArrivals returns the time each of segs segments of size bytes was
// complete, from the chunks of the response (chunk boundaries need not
// match segment boundaries: TCP may merge or split them).
func SegmentArrivals(chunks []endpoint.Chunk, size int64, segs int) []int64 {
	out := make([]int64, 0, segs)
	var got int64
	for _, c := range chunks {
		got += int64(c.Bytes)
		for len(out) < segs && got >= int64(len(out)+1)*size {
			out = append(out, c.T)
		}
	}
	return out
}

// page loads spec.Paths[0] as a page. With connection warm the endpoint
// first opens the connection and completes one unmeasured /echo on it, and
// the measured load (document, then its objects) starts on that connection;
// h1 and h1c open further connections for the objects as the page needs
// them, as in a cold load.
func page(ctx context.Context, spec endpoint.FetchSpec, req Request) (*Result, error) {
	conn, err := req.Connection()
	if err != nil {
		return nil, err
	}
	warm := conn == ConnWarm
	spec.Page, spec.Warm = true, warm
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	doc := fr.Requests[0]
	dc, ok := connOf(fr, doc)
	reused := ok && dc.Start < fr.MeasureStart
	res.Metrics["connection_reused"] = boolMetric(reused)
	if warm {
		// The connection phases happened before the measured part: only
		// the document's first byte, from the start of the measured part.
		if doc.FirstByte > 0 {
			res.Metrics["ttfb_ms"] = Ms(doc.FirstByte - fr.MeasureStart)
		}
	} else {
		connectMetrics(fr, res)
	}
	var end int64
	for _, r := range fr.Requests {
		end = max(end, r.End)
		res.Resources = append(res.Resources, model.Resource{
			Name: r.Path, Protocol: alpnName(res.Negotiated), Start: r.Start, TTFB: r.FirstByte, End: r.End, Bytes: r.Bytes,
		})
	}
	res.Metrics["plt_ms"] = Ms(end - fr.MeasureStart)
	res.Metrics["resources"] = float64(len(fr.Requests))
	res.Metrics["page_bytes"] = float64(fr.Bytes)
	if warm && !reused {
		return res, &InvalidError{Reason: "connection warm: the document did not come over the warmed connection"}
	}
	return res, nil
}

func boolMetric(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// alpnName is the protocol name a browser reports for a connection
// (nextHopProtocol).
func alpnName(n model.Negotiated) string {
	if n.ALPN != "" {
		return n.ALPN
	}
	return "http/1.1"
}

func (e *Executor) cpu(ctx context.Context, spec endpoint.FetchSpec, p params) (*Result, error) {
	now := e.Now
	if now == nil {
		now = time.Now
	}
	stop := make(chan struct{})
	samples := make(chan []model.Point, 1)
	t0 := now()
	go func() { samples <- sampleCPU(stop, t0, now) }()
	res, err := download(ctx, spec, p)
	close(stop)
	pts := <-samples
	if res != nil {
		res.Timelines = append(res.Timelines, model.Series{Kind: model.SeriesCPUClient, Label: "client", Points: pts})
	}
	return res, err
}

// sampleCPU records the client process's CPU utilisation (1.0 = one core)
// every CPUSampleInterval until stop is closed.
func sampleCPU(stop <-chan struct{}, t0 time.Time, now func() time.Time) []model.Point {
	var pts []model.Point
	prev, err := endpoint.ProcessCPU()
	if err != nil {
		return nil
	}
	prevT := now()
	tick := time.NewTicker(CPUSampleInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return pts
		case <-tick.C:
		}
		cur, err := endpoint.ProcessCPU()
		if err != nil {
			return pts
		}
		t := now()
		d := cur.Sub(prev)
		if dt := t.Sub(prevT); dt > 0 {
			pts = append(pts, model.Point{T: int64(prevT.Sub(t0)), V: float64(d.User+d.Sys) / float64(dt)})
		}
		prev, prevT = cur, t
	}
}

func (e *Executor) browserSample(ctx context.Context, req Request, p params) (*Result, error) {
	load := e.Browser
	if req.Client == model.ClientLighthouse {
		load = e.Lighthouse
	}
	if load == nil {
		return nil, fmt.Errorf("client %s: not available in this agent (see quicbench doctor)", req.Client)
	}
	var path string
	switch req.Test {
	case TestPage:
		path = fmt.Sprintf("/page/%d/%s", p.int("objects", 10), url.PathEscape(p.str("size", "8KB")))
	case TestSite:
		path = sitePath(p)
	default:
		return nil, fmt.Errorf("client %s runs only page and site tests, not %s", req.Client, req.Test)
	}
	if req.Protocol != model.ProtoH1 && req.Protocol != model.ProtoH2 && req.Protocol != model.ProtoH3 {
		return nil, fmt.Errorf("client %s speaks h1, h2 and h3, not %s", req.Client, req.Protocol)
	}
	conn, err := req.Connection()
	if err != nil {
		return nil, err
	}
	if conn == ConnWarm && req.Client == model.ClientLighthouse {
		return nil, errors.New("client lighthouse measures cold loads only, not connection warm")
	}
	u := "https://" + net.JoinHostPort(req.Target.Host, strconv.Itoa(req.Target.Port)) + path
	return load(ctx, req, u)
}
