package endpoint

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/model"
)

// Default limits of a Fetch.
const (
	DefaultHandshakeTimeout = 10 * time.Second
	DefaultFirstByteTimeout = 15 * time.Second
	DefaultIdleTimeout      = 10 * time.Second
	DefaultTimeout          = 10 * time.Minute
	DefaultConns            = 6 // HTTP/1.1 connections per host, as browsers open
)

// FetchSpec describes the requests of one sample. Unless Warm, Resume or
// ZeroRTT is set, every Fetch starts from nothing: new sockets, no session
// cache, no tickets, no address-validation tokens carried over.
type FetchSpec struct {
	// Proto is the protocol to use: model.ProtoH1, ProtoH1C, ProtoH2,
	// ProtoH3, ProtoTCP or ProtoQUIC.
	Proto string
	// Addr is the server's "host:port": its TLS port (TCP and UDP) for
	// every protocol but h1c, its cleartext port for h1c.
	Addr string
	// ServerName is the name the certificate is verified against (and the
	// SNI unless it is an IP address); default: the host of Addr.
	ServerName string
	// Paths are the resources to request, each starting with "/". Raw
	// protocols (tcp, quic) accept /bytes/N, /echo (3 bytes, like HTTP's
	// /echo) and /upload (no response body).
	Paths []string
	// Repeat requests the whole path list that many times (default 1).
	Repeat int
	// Upload sends that many pattern bytes with every request: an HTTP POST
	// body, or the raw protocol's upload. 0 sends GET requests.
	Upload int64
	// Parallel is the number of requests in flight at once (default 1:
	// one after another). h2, h3 and quic run them as streams of one
	// connection; h1, h1c and tcp over min(Parallel, Conns) connections.
	Parallel int
	// Conns caps the connections of h1, h1c and tcp (default 6, as
	// browsers). h2, h3 and quic always use one connection.
	Conns int
	// Page treats Paths[0] as an HTML page: once it has arrived, its
	// same-origin subresources (img, script, stylesheet, icon, preload,
	// media and frame sources) are requested all at once, as a browser
	// would (h1: over up to Conns connections, reusing the first). Paths
	// beyond the first are not allowed.
	Page bool
	// Warm opens the connection(s) and completes one unmeasured /echo
	// request on each before the measured part, which then runs on them.
	Warm bool
	// Resume first primes a connection to obtain a TLS session ticket,
	// closes it, then measures new connections that resume the session.
	// Not possible for h1c.
	Resume bool
	// ZeroRTT is Resume plus sending the first requests in 0-RTT (QUIC
	// only: Go's crypto/tls offers no TLS early data over TCP). HTTP/3
	// uploads (POST, not idempotent) wait for the handshake; raw quic
	// requests go out in 0-RTT with their upload.
	ZeroRTT bool
	// Verify checks every byte of /bytes and raw bodies against the
	// pattern (costs client CPU; off for timing runs).
	Verify bool
	// RootCAs verifies the server certificate (nil: the system roots).
	RootCAs *x509.CertPool
	// Insecure skips certificate verification.
	Insecure bool
	// HandshakeTimeout bounds connection establishment (TCP connect + TLS
	// handshake, or the QUIC handshake).
	HandshakeTimeout time.Duration
	// FirstByteTimeout bounds the time from a request fully sent to its
	// first response byte.
	FirstByteTimeout time.Duration
	// IdleTimeout bounds the time without progress while sending a request
	// body or receiving a response body. Bytes that any request of the
	// same connection sends or receives are progress for all of them: a
	// multiplexed connection (h2, h3) serves its streams in turns, and a
	// stream waiting for its turn while the connection moves data is not
	// stalled (50 streams of 128 KB in 16 KB frames over 450 kbit/s wait
	// about 14 s for each turn).
	IdleTimeout time.Duration
	// Timeout bounds the whole Fetch.
	Timeout time.Duration
	// CongestionControl sets the TCP congestion control algorithm of the
	// client's sockets ("cubic", "bbr", "reno"); "" keeps the system
	// default. QUIC always uses quic-go's own (Cubic).
	CongestionControl string
	// KeyLog receives TLS secrets in NSS key log format.
	KeyLog io.Writer
	// QlogDir, if set, receives a qlog file per QUIC connection.
	QlogDir string
	// NoQUICEvents turns quic-go's per-packet event tracing off (unless
	// QlogDir is set): QUIC's PTOCount, CongestionEvents and
	// CongestionStateChanges are then model.NotMeasured, and Retransmits
	// counts every packet declared lost (MTU probes included). Use it
	// where CPU cost is measured: tracing makes
	// quic-go build an event per packet, which TCP's TCP_INFO does not cost.
	NoQUICEvents bool
}

// Chunk is one read of response body bytes.
type Chunk struct {
	T     int64 `json:"t"`     // ns from the sample start when the read returned
	Bytes int   `json:"bytes"` // bytes it returned
}

// RequestTiming is the record of one request. Times are nanoseconds from
// the start of the sample (FetchResult.Started); 0 means "did not happen".
type RequestTiming struct {
	Path        string `json:"path"`
	Conn        int    `json:"conn"`   // index into FetchResult.Conns
	Status      int    `json:"status"` // HTTP status; 200 for a successful raw request
	Start       int64  `json:"start"`  // request issued to the connection
	Sent        int64  `json:"sent"`   // request headers and body handed to the transport
	FirstByte   int64  `json:"first_byte"`
	End         int64  `json:"end"`          // last body byte read (end of body seen)
	Bytes       int64  `json:"bytes"`        // response body bytes
	UploadBytes int64  `json:"upload_bytes"` // request body bytes sent
	// ServerUploadNanos is the server's own time from first to last upload
	// byte (/upload's report, or the raw response header); 0 without upload.
	ServerUploadNanos int64   `json:"server_upload_ns,omitempty"`
	ZeroRTT           bool    `json:"zero_rtt,omitempty"` // sent before the handshake completed
	Chunks            []Chunk `json:"chunks,omitempty"`
	Error             string  `json:"error,omitempty"`
}

// ConnTiming is the record of one connection. Times are nanoseconds from
// the start of the sample.
type ConnTiming struct {
	Local  string `json:"local"`  // client address "ip:port"
	Remote string `json:"remote"` // server address
	Start  int64  `json:"start"`  // dial started
	// Connected: TCP connect() returned (SYN-ACK received); QUIC: the
	// connection became usable (handshake complete, or 0-RTT keys ready).
	Connected int64 `json:"connected"`
	// Handshake: TLS handshake complete (TCP), QUIC handshake complete; 0
	// for h1c.
	Handshake  int64                `json:"handshake"`
	Closed     int64                `json:"closed"` // close started (statistics were read just before)
	Requests   int                  `json:"requests"`
	Negotiated model.Negotiated     `json:"negotiated"`
	Transport  model.TransportStats `json:"transport"`
}

// FetchResult is everything one Fetch measured.
type FetchResult struct {
	Proto   string    `json:"proto"`
	Started time.Time `json:"started"` // wall clock at time 0
	// MeasureStart and MeasureEnd delimit the measured part (ns): after
	// warm-up or priming, until the last body byte.
	MeasureStart int64           `json:"measure_start"`
	MeasureEnd   int64           `json:"measure_end"`
	Requests     []RequestTiming `json:"requests"` // measured requests, in issue order
	Conns        []ConnTiming    `json:"conns"`    // connections the measured requests used
	// Primer is the connection that fetched the session ticket (Resume,
	// ZeroRTT); it is not part of the measurement.
	Primer      *ConnTiming      `json:"primer,omitempty"`
	Bytes       int64            `json:"bytes"`        // response body bytes of the measured requests
	UploadBytes int64            `json:"upload_bytes"` // request body bytes of the measured requests
	Negotiated  model.Negotiated `json:"negotiated"`   // of the first measured connection
	// CPU holds the client process's CPU time over the measured part
	// (ClientUser, ClientSys); the server fields are left for the caller.
	CPU model.CPUUsage `json:"cpu"`
}

// chunkHookKey carries a func() called after every received chunk (tests).
type chunkHookKey struct{}

// ConnRefs names the measured connections for Server.ConnStats and the
// control protocol's stats request.
func (r *FetchResult) ConnRefs() []ConnRef {
	out := make([]ConnRef, len(r.Conns))
	for i, c := range r.Conns {
		kind := "tcp"
		if model.IsQUIC(r.Proto) {
			kind = "quic"
		}
		out[i] = ConnRef{Kind: kind, Addr: c.Local}
	}
	return out
}

// Transport returns the transport statistics of the measured connections
// whose statistics were read: a connection whose TCP_INFO could not be
// read has none (never a row of zeros that would read as measured), so
// fewer rows than connections means some were not measured.
func (r *FetchResult) Transport() []model.TransportStats {
	out := make([]model.TransportStats, 0, len(r.Conns))
	for _, c := range r.Conns {
		if c.Transport.Kind != "" {
			out = append(out, c.Transport)
		}
	}
	return out
}

// ChunkSeries returns one model.SeriesChunks timeline per request (label:
// "<index> <path>"), for streaming and head-of-line analysis.
func (r *FetchResult) ChunkSeries() []model.Series {
	out := make([]model.Series, 0, len(r.Requests))
	for i, q := range r.Requests {
		s := model.Series{Kind: model.SeriesChunks, Label: fmt.Sprintf("%d %s", i, q.Path)}
		s.Points = make([]model.Point, len(q.Chunks))
		for j, c := range q.Chunks {
			s.Points[j] = model.Point{T: c.T, V: float64(c.Bytes)}
		}
		out = append(out, s)
	}
	return out
}

func (s *FetchSpec) normalize() error {
	if !slices.Contains(model.Protocols, s.Proto) {
		return fmt.Errorf("unknown protocol %q (want one of %s)", s.Proto, strings.Join(model.Protocols, ", "))
	}
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("server address %q: want host:port", s.Addr)
	}
	if s.ServerName == "" {
		s.ServerName = host
	}
	if len(s.Paths) == 0 {
		return errors.New("no paths to request")
	}
	for _, p := range s.Paths {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("path %q must start with /", p)
		}
		if isRaw(s.Proto) {
			if _, err := rawRequestFor(p, 0); err != nil {
				return err
			}
		}
	}
	if s.Repeat < 0 || s.Parallel < 0 || s.Conns < 0 || s.Upload < 0 {
		return errors.New("the repeat count, parallelism, connection count and upload size must not be negative")
	}
	if s.Upload > content.MaxSize {
		return fmt.Errorf("upload of %d bytes exceeds the maximum of 1 TiB", s.Upload)
	}
	if s.Repeat == 0 {
		s.Repeat = 1
	}
	if s.Parallel == 0 {
		s.Parallel = 1
	}
	if s.Conns == 0 {
		s.Conns = DefaultConns
	}
	if s.Page && len(s.Paths) != 1 {
		return errors.New("page mode takes exactly one path: the HTML page")
	}
	if s.Page && isRaw(s.Proto) {
		return fmt.Errorf("page mode needs HTTP; %s is a raw transport", s.Proto)
	}
	if s.ZeroRTT {
		if !model.IsQUIC(s.Proto) {
			return unsupported("0-RTT over %s: Go's crypto/tls implements no TLS 1.3 early data over TCP; only h3 and quic can measure 0-RTT", s.Proto)
		}
		s.Resume = true
	}
	if s.Resume && s.Proto == model.ProtoH1C {
		return unsupported("session resumption over h1c: cleartext HTTP has no TLS session")
	}
	if s.Resume && s.Warm {
		return errors.New("warm connections and resumption/0-RTT exclude each other: a warm connection is already established")
	}
	if s.HandshakeTimeout <= 0 {
		s.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if s.FirstByteTimeout <= 0 {
		s.FirstByteTimeout = DefaultFirstByteTimeout
	}
	if s.IdleTimeout <= 0 {
		s.IdleTimeout = DefaultIdleTimeout
	}
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	return nil
}

func isRaw(proto string) bool { return proto == model.ProtoTCP || proto == model.ProtoQUIC }

func multiplexed(proto string) bool {
	return proto == model.ProtoH2 || proto == model.ProtoH3 || proto == model.ProtoQUIC
}

// request is one request in flight.
type request struct {
	t      *RequestTiming
	upload int64
	wd     *watchdog
	conn   *connProgress // the requests in flight on its connection
	verify bool
	keep   bool   // keep the body (page HTML)
	body   []byte // kept body
	warm   bool   // warm-up or priming request: not recorded
}

// clientConn is one client connection of any protocol.
type clientConn interface {
	do(ctx context.Context, rq *request) error
	// negotiated returns what the connection negotiated so far, and
	// whether that is final (a 0-RTT QUIC connection learns it later).
	negotiated() (model.Negotiated, bool)
	// timing returns the connection's record; complete after close.
	timing() *ConnTiming
	// close reads the final transport statistics, then closes.
	close()
}

// fetcher runs one Fetch.
type fetcher struct {
	spec    FetchSpec
	t0      time.Time
	tlsConf *tls.Config
	http    *httpClient // h1, h1c, h2

	onChunk func()       // test hook: called after every body chunk
	tickets *ticketCache // session cache of Resume and ZeroRTT fetches

	mu    sync.Mutex
	conns []clientConn // measured connections, in dial order
	// inFlight holds, per connection, the watchdogs of its requests in
	// flight (request.progress).
	inFlight map[clientConn]*connProgress
	reqs     []*RequestTiming
	measure  bool // dialled connections are measured ones
}

func (f *fetcher) now() int64 { return int64(time.Since(f.t0)) }

// Fetch runs the requests of spec and returns what it measured. On error
// the result still holds everything measured until then (requests carry
// their own error), and the error says what failed: a *TimeoutError, a
// *MismatchError, a *StatusError, an error wrapping errors.ErrUnsupported,
// or a transport error.
func Fetch(ctx context.Context, spec FetchSpec) (*FetchResult, error) {
	if err := spec.normalize(); err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	f := &fetcher{spec: spec}
	f.onChunk, _ = ctx.Value(chunkHookKey{}).(func())
	f.tlsConf = clientTLSConfig(spec.RootCAs, spec.ServerName, spec.Insecure, spec.KeyLog)
	if spec.Resume {
		f.tickets = &ticketCache{ClientSessionCache: tls.NewLRUClientSessionCache(4), got: make(chan struct{})}
		f.tlsConf.ClientSessionCache = f.tickets
	}
	if !isRaw(spec.Proto) && spec.Proto != model.ProtoH3 {
		f.http = newHTTPClient(f)
		defer f.http.tr.CloseIdleConnections()
	}
	ctx, cancel := context.WithTimeoutCause(ctx, spec.Timeout, &TimeoutError{Phase: PhaseTotal, Limit: spec.Timeout})
	defer cancel()

	f.t0 = time.Now()
	res := &FetchResult{Proto: spec.Proto, Started: f.t0}
	err := f.run(ctx, res)
	if err != nil {
		err = f.classify(ctx, err)
	}
	f.finish(res)
	if err == nil {
		err = f.checkNegotiated(res)
	}
	return res, err
}

func (f *fetcher) run(ctx context.Context, res *FetchResult) error {
	spec := f.spec
	if spec.Resume {
		primer, err := f.prime(ctx)
		if primer != nil {
			res.Primer = primer
		}
		if err != nil {
			return fmt.Errorf("priming connection: %w", err)
		}
	}
	f.mu.Lock()
	f.measure = true
	f.mu.Unlock()

	var reqs []*request
	for r := 0; r < spec.Repeat; r++ {
		for _, p := range spec.Paths {
			reqs = append(reqs, f.newRequest(p))
		}
	}
	p := &pool{f: f, mux: multiplexed(spec.Proto)}
	defer p.closeAll()
	if spec.Warm {
		if err := p.warm(ctx, min(spec.Parallel, len(reqs))); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	cpu0, cpuErr := ProcessCPU()
	res.MeasureStart = f.now()
	err := f.measured(ctx, p, reqs)
	res.MeasureEnd = f.now()
	cpu1, cpuErr2 := ProcessCPU()
	if cpuErr == nil && cpuErr2 == nil {
		d := cpu1.Sub(cpu0)
		res.CPU.ClientUser, res.CPU.ClientSys = d.User, d.Sys
	}
	return err
}

func (f *fetcher) measured(ctx context.Context, p *pool, reqs []*request) error {
	spec := f.spec
	if !spec.Page {
		return p.runStage(ctx, reqs, spec.Parallel)
	}
	html := reqs[0]
	html.keep = true
	if err := p.runStage(ctx, reqs[:1], 1); err != nil {
		return err
	}
	links, err := Subresources(html.t.Path, html.body)
	if err != nil {
		return fmt.Errorf("page %s: %w", html.t.Path, err)
	}
	var subs []*request
	for _, l := range links {
		subs = append(subs, f.newRequest(l))
	}
	if len(subs) == 0 {
		return nil
	}
	return p.runStage(ctx, subs, len(subs))
}

func (f *fetcher) newRequest(path string) *request {
	rq := &request{t: &RequestTiming{Path: path}, upload: f.spec.Upload}
	rq.verify = f.spec.Verify && (isRaw(f.spec.Proto) || strings.HasPrefix(path, "/bytes/"))
	f.mu.Lock()
	f.reqs = append(f.reqs, rq.t)
	f.mu.Unlock()
	return rq
}

// prime opens a connection, completes one small request (which delivers
// the session ticket) and closes it.
func (f *fetcher) prime(ctx context.Context) (*ConnTiming, error) {
	c, err := f.dial(ctx, false)
	if err != nil {
		return nil, err
	}
	rq := &request{t: &RequestTiming{Path: "/echo"}, warm: true}
	err = f.do(ctx, c, rq)
	if err == nil && f.tickets != nil {
		// TLS 1.3 sends session tickets after the handshake; on a lossy
		// link the ticket may still be in flight (or being retransmitted)
		// when the response is complete. Closing now would make the
		// measured connection a full handshake.
		t := time.NewTimer(f.spec.FirstByteTimeout)
		select {
		case <-f.tickets.got:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	c.close()
	ct := *c.timing()
	if err != nil {
		return &ct, err
	}
	return &ct, nil
}

// ticketCache is a client session cache that signals the first ticket.
type ticketCache struct {
	tls.ClientSessionCache
	got  chan struct{}
	once sync.Once
}

// Put stores a ticket and signals its arrival.
func (c *ticketCache) Put(key string, cs *tls.ClientSessionState) {
	c.ClientSessionCache.Put(key, cs)
	if cs != nil {
		c.once.Do(func() { close(c.got) })
	}
}

// do runs rq on c under a watchdog and maps errors.
func (f *fetcher) do(ctx context.Context, c clientConn, rq *request) error {
	// A request without body is written at once: its first limit is the
	// first-byte one. An upload is bounded by the idle limit until sent.
	phase, limit := PhaseFirstByte, f.spec.FirstByteTimeout
	if rq.upload > 0 {
		phase, limit = PhaseIdle, f.spec.IdleTimeout
	}
	rctx, wd := newWatchdog(ctx, phase, limit)
	defer wd.stop()
	rq.wd = wd
	f.mu.Lock()
	rq.t.Conn = slices.Index(f.conns, c)
	if f.inFlight == nil {
		f.inFlight = map[clientConn]*connProgress{}
	}
	cp := f.inFlight[c]
	if cp == nil {
		cp = &connProgress{}
		f.inFlight[c] = cp
	}
	f.mu.Unlock()
	rq.conn = cp
	cp.add(wd)
	defer cp.remove(wd)
	err := c.do(rctx, rq)
	if err != nil {
		if cause := context.Cause(rctx); cause != nil {
			var te *TimeoutError
			if errors.As(cause, &te) {
				err = te
			}
		}
		err = fmt.Errorf("%s %s: %w", f.spec.Proto, rq.t.Path, err)
		rq.t.Error = err.Error()
		return err
	}
	return nil
}

// dial opens a connection of the fetch's protocol; measured connections
// are recorded in f.conns.
func (f *fetcher) dial(ctx context.Context, early bool) (clientConn, error) {
	dctx, cancel := context.WithTimeoutCause(ctx, f.spec.HandshakeTimeout, &TimeoutError{Phase: PhaseHandshake, Limit: f.spec.HandshakeTimeout})
	defer cancel()
	var c clientConn
	var err error
	switch f.spec.Proto {
	case model.ProtoH1, model.ProtoH1C, model.ProtoH2:
		c, err = f.http.dial(dctx)
	case model.ProtoH3, model.ProtoQUIC:
		c, err = f.dialQUIC(dctx, early)
	case model.ProtoTCP:
		c, err = f.dialRawTCP(dctx)
	}
	if err != nil {
		if cause := context.Cause(dctx); cause != nil {
			var te *TimeoutError
			if errors.As(cause, &te) {
				return nil, te
			}
		}
		return nil, f.dialError(err)
	}
	if n, final := c.negotiated(); final {
		if err := f.checkALPN(n); err != nil {
			c.close()
			return nil, err
		}
	}
	f.mu.Lock()
	if f.measure {
		f.conns = append(f.conns, c)
	}
	f.mu.Unlock()
	return c, nil
}

// classify turns the total-timeout cancellation into its *TimeoutError.
func (f *fetcher) classify(ctx context.Context, err error) error {
	var te *TimeoutError
	if errors.As(err, &te) {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && errors.As(cause, &te) {
		return fmt.Errorf("%w (%v)", te, err)
	}
	return err
}

// finish copies the connection and request records into res.
func (f *fetcher) finish(res *FetchResult) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		res.Conns = append(res.Conns, *c.timing())
	}
	for _, t := range f.reqs {
		if t.Start == 0 && t.Error == "" {
			continue // never issued
		}
		if t.Error == "" && t.Conn >= 0 && t.Conn < len(res.Conns) {
			res.Conns[t.Conn].Requests++
		}
		res.Requests = append(res.Requests, *t)
		res.Bytes += t.Bytes
		res.UploadBytes += t.UploadBytes
	}
	if len(res.Conns) > 0 {
		res.Negotiated = res.Conns[0].Negotiated
	}
}

// pool holds the connections of the measured part: one for multiplexed
// protocols, up to Conns otherwise (slot i belongs to worker i).
type pool struct {
	f     *fetcher
	mux   bool
	mu    sync.Mutex
	slots []clientConn
}

func (p *pool) get(ctx context.Context, slot int) (clientConn, error) {
	p.mu.Lock()
	for len(p.slots) <= slot {
		p.slots = append(p.slots, nil)
	}
	c := p.slots[slot]
	p.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := p.f.dial(ctx, p.f.spec.ZeroRTT)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.slots[slot] = c
	p.mu.Unlock()
	return c, nil
}

// warm opens the connections the measured part will use and completes one
// /echo request on each.
func (p *pool) warm(ctx context.Context, parallel int) error {
	n := 1
	if !p.mux {
		n = min(parallel, p.f.spec.Conns)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Go(func() {
			c, err := p.get(ctx, i)
			if err == nil {
				err = p.f.do(ctx, c, &request{t: &RequestTiming{Path: "/echo"}, warm: true})
			}
			errs[i] = err
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runStage runs reqs with at most parallel in flight and returns the first
// error (which stops the remaining requests).
func (p *pool) runStage(ctx context.Context, reqs []*request, parallel int) error {
	workers := min(parallel, len(reqs))
	if !p.mux {
		workers = min(workers, p.f.spec.Conns)
	} else if _, err := p.get(ctx, 0); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	queue := make(chan *request, len(reqs))
	for _, rq := range reqs {
		queue <- rq
	}
	close(queue)
	var once sync.Once
	var first error
	fail := func(err error) {
		once.Do(func() { first = err; cancel(err) })
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		slot := w
		if p.mux {
			slot = 0
		}
		wg.Go(func() {
			for rq := range queue {
				if ctx.Err() != nil {
					return
				}
				c, err := p.get(ctx, slot)
				if err != nil {
					rq.t.Error = err.Error()
					fail(err)
					return
				}
				if err := p.f.do(ctx, c, rq); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// closeAll closes the measured connections, reading their statistics.
func (p *pool) closeAll() {
	p.mu.Lock()
	slots := p.slots
	p.slots = nil
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range slots {
		if c != nil {
			wg.Go(c.close)
		}
	}
	wg.Wait()
}

// readBody reads a response body to its end, recording every chunk. A body
// that "ends" after ctx was cancelled (net/http's HTTP/1.1 body can report
// EOF when its request is cancelled) is an error, not an end.
func (f *fetcher) readBody(ctx context.Context, r io.Reader, rq *request) error {
	buf := make([]byte, 64<<10)
	var v content.Verifier
	for {
		n, err := r.Read(buf)
		if n > 0 {
			t := f.now()
			if rq.t.FirstByte == 0 {
				rq.t.FirstByte = t
			}
			rq.t.Chunks = append(rq.t.Chunks, Chunk{T: t, Bytes: n})
			rq.t.Bytes += int64(n)
			rq.progress()
			if rq.verify {
				if verr := v.Check(buf[:n]); verr != nil {
					return verr
				}
			}
			if rq.keep {
				rq.body = append(rq.body, buf[:n]...)
			}
			if f.onChunk != nil {
				f.onChunk()
			}
		}
		if err == io.EOF {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			rq.t.End = f.now()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// progressReader feeds the watchdogs while a request body is being sent.
type progressReader struct {
	r  io.Reader
	rq *request
	n  atomic.Int64
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n.Add(int64(n))
	if n > 0 {
		p.rq.progress()
	}
	return n, err
}

// progress re-arms the watchdog of every request in flight on rq's
// connection (FetchSpec.IdleTimeout), rq's own when it has none.
func (rq *request) progress() {
	if rq.conn == nil {
		rq.wd.progress()
		return
	}
	rq.conn.progress()
}

// connProgress is the set of watchdogs of one connection's requests in
// flight.
type connProgress struct {
	mu  sync.Mutex
	wds map[*watchdog]struct{}
}

func (c *connProgress) add(w *watchdog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wds == nil {
		c.wds = map[*watchdog]struct{}{}
	}
	c.wds[w] = struct{}{}
}

func (c *connProgress) remove(w *watchdog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.wds, w)
}

// progress re-arms every watchdog of the connection for its current phase.
func (c *connProgress) progress() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for w := range c.wds {
		w.progress()
	}
}
