// Package workload runs quicbench's tests (defined, with their typed
// parameters, in package plan): latency, ttfb, handshake, download, upload,
// multiplex, stream, page, site and cpu, each in a file of its own
// (test_NAME.go). A test runs on the client side (inside the client
// namespace, in the client agent process): Execute takes one Request, whose
// parameters the runner decoded (plan.CellParams), drives the built-in
// client (package endpoint) or a browser client's loader, and turns what
// they recorded into the metrics of docs/metrics.md.
package workload

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// HOLBin is the width of the bins of the multiplex test's stall count
// (hol_empty_bins); its timelines use HOLBinFor.
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
	// DirSlash: the server answers a page's document (a directory of
	// files on its disk) only at its path with a trailing slash (its
	// stack's dir_slash): clients ask for /page/N/S/ there.
	DirSlash bool `json:"dir_slash,omitempty"`
}

// Request is one sample to take.
type Request struct {
	Test     string      `json:"test"`
	Protocol string      `json:"protocol"`
	Client   string      `json:"client"` // model.ClientBuiltin (default) or a client of the registry of stacks (package peers)
	Params   plan.Params `json:"params"` // the cell's test parameters, decoded by the runner (plan.StoredCellParams) and checked by Execute
	CC       string      `json:"cc"`     // the plan's congestion control: the client's TCP sockets' ("" = namespace default), and its QUIC stack's where it can choose
	// QUICEvents turns on quic-go's per-packet event tracing, which yields
	// the PTO count, congestion events and retransmissions of QUIC
	// connections but costs quic-go 20-35% more CPU per MB; off by default
	// so that QUIC is not handicapped against TCP, whose TCP_INFO is free.
	QUICEvents bool   `json:"quic_events"`
	Target     Target `json:"target"`
	// Contract declares the request's client when it is a contract stack
	// (the agent declares it in its registry before the sample).
	Contract *ContractDecl `json:"contract,omitempty"`
	Timeout  time.Duration `json:"timeout"` // whole sample; 0 = endpoint default
	// LinkWait is the longest a delivered packet can take across the
	// link, both directions together (spec.Link.MaxWait: delays, a full
	// bottleneck queue's drain, blackouts); the client's first-byte and
	// idle limits grow with it (StallLimit), so that a deep queue is not
	// taken for a dead link. 0 = the endpoint defaults.
	LinkWait time.Duration `json:"link_wait,omitempty"`
	// KeyLog, when set, is a file the client appends the TLS secrets of the
	// sample's connections to (SSLKEYLOGFILE format), for the sample's
	// packet capture: every client that can write them does (the built-in
	// client's crypto/tls and quic-go, the browsers, the client programs of
	// the peer program protocol, ngtcp2's through GnuTLS).
	KeyLog string `json:"keylog,omitempty"`
	// Replay is set for a site sample of a recorded page (replay.go).
	Replay *Replay `json:"replay,omitempty"`
	// HARFile, for a browser client's page or site sample, is a file to
	// write the measured load's HAR 1.2 to (capture: har): the browser's
	// network events with timings and each resource's protocol. Such a
	// sample gets a fresh browser (its recording is a browser's, not a
	// context's).
	HARFile string `json:"har_file,omitempty"`
	// BrowserRestart is the plan's browser_restart for the browser
	// clients: "auto" ("" too) keeps the agent's browser across samples
	// and gives each a fresh isolated context, "always" starts a fresh
	// browser per sample. BrowserMemoryLimit is the plan's
	// browser_memory_limit (bytes; 0 the default): a kept browser holding
	// more is restarted before its next sample. BrowserFileLimit is the
	// plan's browser_files_limit (0 the default), the same for the open
	// files of the browser's processes.
	BrowserRestart     string `json:"browser_restart,omitempty"`
	BrowserMemoryLimit int64  `json:"browser_memory_limit,omitempty"`
	BrowserFileLimit   int    `json:"browser_files_limit,omitempty"`
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
	CPU        model.CPUUsage         `json:"cpu"`             // client fields only: the built-in client's over the whole sample, a browser's processes' over their life
	// ClientCPUUnavailable is set when the client's CPU time could not be
	// read: CPU is then zero, and the runner leaves the CPU metrics absent.
	ClientCPUUnavailable bool             `json:"client_cpu_unavailable,omitempty"`
	Bytes                int64            `json:"bytes"` // application bytes moved (both directions)
	Wall                 time.Duration    `json:"wall"`  // measured part
	Timelines            []model.Series   `json:"timelines,omitempty"`
	Resources            []model.Resource `json:"resources,omitempty"`
	// Prep is the unmeasured preparation inside the client before the
	// measured part: the warm-up connections and their unmeasured request
	// (latency; page and site with connection warm), the priming connection
	// that fetches the session ticket (handshake resumed and 0rtt), the
	// browser's start (Chromium) and its priming load (Chromium with
	// connection warm). 0 when nothing precedes the measured part; when the
	// preparation fails, the time it took until it failed. Wall + Prep
	// never exceeds the time the client spent on the sample.
	Prep time.Duration `json:"prep"`
	// Warnings are the client's validity warnings, which the runner
	// stores with the sample (a browser restarted before the sample, or
	// failed during it).
	Warnings []string `json:"warnings,omitempty"`
}

// BrowserLoader loads a page in a real browser. The agent sets it when
// a browser is available; Execute fails a browser client's samples without it.
type BrowserLoader func(ctx context.Context, req Request, url string) (*Result, error)

// PeerFetch runs the requests of spec with another HTTP client than the
// built-in one, in place of endpoint.Fetch, so that the test's metrics are
// derived from its record by the same code. The FetchResult's CPU is the
// client program's over the whole sample; extra holds metrics that
// describe the client's configuration (docs/metrics.md, "aioquic").
type PeerFetch func(ctx context.Context, req Request, spec endpoint.FetchSpec) (fr *endpoint.FetchResult, extra map[string]float64, err error)

// peerFetchKey carries, in the context of a fetch client's sample, the
// PeerFetch that fetch calls instead of endpoint.Fetch.
type peerFetchKey struct{}

type boundPeerFetch func(ctx context.Context, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error)

// Executor runs tests. The zero value runs built-in client tests only.
type Executor struct {
	// Clients takes the samples of the registry's clients, by client name
	// (Clients builds every registered one).
	Clients map[string]ClientImpl
	// Now and Sleep are the clock of the CPU sampler (tests inject fakes).
	Now func() time.Time
	// Resolve makes recorded host names resolve to their replay addresses
	// for the browsers of a replay sample; nil installs the mapping with
	// package hostmap (in the agent's own mount namespace).
	Resolve func(hosts map[string]string) error
}

// Execute takes one sample. It never returns a nil Result: failures are
// reported in Status and Error.
func (e *Executor) Execute(ctx context.Context, req Request) *Result {
	cpu0, cpuErr0 := endpoint.ProcessCPU()
	res, err := e.execute(ctx, req)
	cpu1, cpuErr1 := endpoint.ProcessCPU()
	if res == nil {
		res = &Result{}
	}
	if req.Client == "" || req.Client == model.ClientBuiltin {
		// The built-in client's CPU covers the whole sample in this
		// process, as the server's does in its own (the runner reads it
		// around the agent's call): preparation, the measured part and
		// the connections' close.
		if cpuErr0 == nil && cpuErr1 == nil {
			d := cpu1.Sub(cpu0)
			res.CPU.ClientUser, res.CPU.ClientSys = d.User, d.Sys
		} else {
			res.ClientCPUUnavailable = true
		}
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

// run is how the clients run one test, defined by the test's file
// (test_NAME.go) for the test plan defines under that name.
type run struct {
	// builtin takes a sample with the built-in client.
	builtin func(ctx context.Context, e *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error)
	// path is the path of the page a page-loading test loads, with every
	// client (builtin finds it as spec.Paths[0]); nil for the tests the
	// browser clients do not run as page loads.
	path func(p plan.Params) string
	// bench is how the browser clients run the test in the bench page;
	// nil for the tests they do not run there.
	bench *benchRun
}

// runs are the tests' runs, by test name.
var runs = map[string]run{}

// define sets how the clients run a test (from the init function of its
// file).
func define(test string, r run) {
	if _, dup := runs[test]; dup || r.builtin == nil {
		panic("workload: test " + test + " defined twice or without a built-in run")
	}
	runs[test] = r
}

func (e *Executor) execute(ctx context.Context, req Request) (*Result, error) {
	r, ok := runs[req.Test]
	if !ok {
		return nil, fmt.Errorf("unknown test %q", req.Test)
	}
	if !slices.Contains(model.Protocols, req.Protocol) {
		return nil, fmt.Errorf("unknown protocol %q", req.Protocol)
	}
	st, impl, err := e.clientFor(req.Client, req.Contract)
	if err != nil {
		return nil, err
	}
	if req.Replay != nil {
		if req.Test != plan.TestSite {
			return nil, fmt.Errorf("a recorded page is loaded by the site test, not %s", req.Test)
		}
		return e.replaySample(ctx, req, r, st, impl)
	}
	if st != nil {
		switch st.Client.Kind {
		case peers.KindBrowser, peers.KindAudit:
			if r.path == nil && st.Client.Bench {
				return e.benchSample(ctx, req, r, st, impl)
			}
			return e.browserSample(ctx, req, r, st, impl)
		case peers.KindCommand:
			return e.contractSample(ctx, req, st)
		case peers.KindFetch:
			if impl.Fetch == nil {
				return nil, fmt.Errorf("client %s: no fetch in this agent", req.Client)
			}
			if why := fetchUnsupported(st, req.Test, req.Protocol); why != "" {
				return nil, errors.New(why)
			}
			ctx = context.WithValue(ctx, peerFetchKey{}, boundPeerFetch(func(ctx context.Context, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
				return impl.Fetch(ctx, req, spec)
			}))
		default:
			return nil, fmt.Errorf("client %s: a %s client takes no samples in the agent", req.Client, st.Client.Kind)
		}
	}
	if err := plan.CheckParams(req.Test, req.Params); err != nil {
		return nil, err
	}
	spec, err := baseSpec(req)
	if err != nil {
		return nil, err
	}
	if req.KeyLog != "" && st == nil {
		// the built-in client's; a client program writes the file itself
		f, err := os.OpenFile(req.KeyLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("key log: %w", err)
		}
		defer f.Close()
		spec.KeyLog = f
	}
	if r.path != nil {
		spec.Paths = []string{pathFor(req, r)}
	}
	return r.builtin(ctx, e, spec, req.Params)
}

// StallLimit is the time without progress after which a sample over a
// link whose packets take up to wait (Request.LinkWait) counts as stalled:
// three waits and 10 s. A lost segment's retransmission queues behind
// what the sender had in flight (a full queue: wait), and TCP's
// retransmission timeout, srtt + 4 rttvar, can reach twice more when the
// queue made srtt; the 10 s are the default limits' margin. With netem's
// default 1000-packet queue, 1 Mbit/s and 100 ms of delay: 46.3 s, where
// the default 10 s failed 5 of 5 HTTP/2 downloads of 50 MB at 0.1% loss
// (size-bandwidth-grid).
func StallLimit(wait time.Duration) time.Duration {
	if wait <= 0 {
		return 0
	}
	return 3*wait + 10*time.Second
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
		FirstByteTimeout:  max(endpoint.DefaultFirstByteTimeout, StallLimit(req.LinkWait)),
		IdleTimeout:       max(endpoint.DefaultIdleTimeout, StallLimit(req.LinkWait)),
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

// fetch runs spec and fills the parts of a Result common to every test.
func fetch(ctx context.Context, spec endpoint.FetchSpec) (*endpoint.FetchResult, *Result, error) {
	start := time.Now()
	var fr *endpoint.FetchResult
	var extra map[string]float64
	var err error
	peer, _ := ctx.Value(peerFetchKey{}).(boundPeerFetch)
	if peer != nil {
		fr, extra, err = peer(ctx, spec)
	} else {
		fr, err = endpoint.Fetch(ctx, spec)
	}
	took := time.Since(start)
	res := &Result{Metrics: map[string]float64{}}
	maps.Copy(res.Metrics, extra)
	if fr != nil && peer != nil {
		res.CPU = fr.CPU // the peer client's whole sample (Execute reads the built-in client's)
	}
	if fr != nil {
		res.Negotiated = fr.Negotiated
		res.Transport = fr.Transport()
		res.Conns = fr.ConnRefs()
		res.Bytes = fr.Bytes + fr.UploadBytes
		res.Wall = time.Duration(fr.MeasureEnd - fr.MeasureStart)
		res.Prep = prepOf(spec, fr, took)
		if len(fr.Conns) > 0 {
			res.Metrics["connections"] = float64(len(fr.Conns))
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

// fetchBytes fetches /bytes/N, N = size, on a fresh connection and
// records the connection phases.
func fetchBytes(ctx context.Context, spec endpoint.FetchSpec, size int64) (*endpoint.FetchResult, *Result, int64, error) {
	spec.Paths = []string{fmt.Sprintf("/bytes/%d", size)}
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return fr, res, size, err
	}
	connectMetrics(fr, res)
	return fr, res, size, nil
}

func (e *Executor) browserSample(ctx context.Context, req Request, r run, st *peers.Stack, impl ClientImpl) (*Result, error) {
	load := impl.Load
	if load == nil {
		return nil, fmt.Errorf("client %s: not available in this agent (see quicbench doctor)", req.Client)
	}
	if r.path == nil {
		return nil, fmt.Errorf("client %s runs only page and site tests, not %s", req.Client, req.Test)
	}
	if !slices.Contains(st.Client.Protocols, req.Protocol) {
		return nil, fmt.Errorf("client %s speaks %s, not %s", req.Client, peers.List(st.Client.Protocols), req.Protocol)
	}
	if err := plan.CheckParams(req.Test, req.Params); err != nil {
		return nil, err
	}
	if req.Params.Connection == plan.ConnWarm && st.Client.ColdOnly != "" {
		return nil, fmt.Errorf("client %s measures cold loads only, not connection warm", req.Client)
	}
	u := "https://" + net.JoinHostPort(req.Target.Host, strconv.Itoa(req.Target.Port)) + pathFor(req, r)
	if req.Replay != nil {
		u = req.Replay.PageURL
	}
	return load(ctx, req, u)
}

// pathFor is the path of the page a test r loads for req: the test's, with
// a trailing slash for a server that answers a page's document only there.
func pathFor(req Request, r run) string {
	p := r.path(req.Params)
	if req.Target.DirSlash && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}
