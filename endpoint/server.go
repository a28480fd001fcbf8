// Package endpoint is quicbench's built-in server and client: HTTP/1.1 and
// HTTP/2 over TLS 1.3 on TCP, cleartext HTTP/1.1, HTTP/3 over QUIC, and a raw
// request/response protocol over TLS/TCP and over QUIC (package raw). Both
// ends are the same program with the same certificate and TLS settings.
//
// The client (Fetch) records, for every request, nanosecond timestamps from
// the start of the sample (connection start, connect, handshake, request
// sent, first byte, every received chunk, last byte), what each connection
// really negotiated, its final transport statistics (TCP_INFO or quic-go's
// connection statistics), and the client process's CPU time. A response
// over another protocol than the one asked for is an error (*MismatchError),
// never a measurement. docs/metrics.md defines every figure.
package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/endpoint/replay"
	"github.com/quicbench/quicbench/internal/sockopt"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// ServerConfig configures a server. The zero value serves every protocol on
// free ports of every local address with a freshly generated certificate.
type ServerConfig struct {
	// Host is the IP address to listen on; "" listens on all addresses.
	Host string
	// Port is the TLS port, the same number on TCP (h1, h2, tcp) and UDP
	// (h3, quic); 0 picks a port free on both.
	Port int
	// PlainPort is the cleartext HTTP/1.1 (h1c) port; 0 picks a free one.
	PlainPort int
	// Names are extra IP addresses and DNS names for the generated
	// certificate. Host (or, when Host is empty, every local address),
	// "localhost", 127.0.0.1 and ::1 are always included.
	Names []string
	// Certificate, if set, is presented instead of a generated one (then
	// ServerInfo.CAPEM is empty).
	Certificate *tls.Certificate
	// Protocols lists the protocols to serve (model.Proto*); nil serves all.
	Protocols []string
	// Sites maps NAME to a directory served as /site/NAME/.
	Sites map[string]string
	// FilesDir, if set, is served as /files/.
	FilesDir string
	// CongestionControl sets the TCP congestion control algorithm of the
	// server's TCP sockets ("cubic", "bbr", "reno"); "" keeps the system
	// default. QUIC always uses quic-go's own (Cubic).
	CongestionControl string
	// KeyLog receives TLS secrets in NSS key log format (SSLKEYLOGFILE),
	// for TCP and QUIC alike, so that Wireshark can decrypt captures.
	KeyLog io.Writer
	// QlogDir, if set, receives one qlog file per QUIC connection.
	QlogDir string
	// NoQUICEvents turns quic-go's per-packet event tracing off on the
	// server (unless QlogDir is set); see FetchSpec.NoQUICEvents.
	NoQUICEvents bool
	// IdleTimeout closes a raw-protocol TCP connection (tcp) when a read
	// or a write on it makes no progress for that long, between requests
	// or within one (a client that stops sending its upload or reading
	// its response); 0 means DefaultServerIdleTimeout.
	IdleTimeout time.Duration
	// Logf receives errors that have no caller to return to (nil: dropped).
	Logf func(format string, args ...any)
	// Replay, when set, also serves recorded page loads (package replay):
	// every group of its layout on its own address, which must be local
	// (the runner adds them to the server namespace's device), with
	// HTTP/1.1, HTTP/2 and HTTP/3 on each of the group's ports and one
	// leaf certificate per host name, minted by the server's CA with the
	// key of its own leaf (so ServerInfo.SPKI pins them all). It needs the
	// generated certificate (no Certificate).
	Replay *replay.Origins
	// OnConn, if set, receives every TLS connection's open (after its
	// handshake) and close (ConnEvent), over TCP and QUIC.
	OnConn func(ConnEvent)
}

// DefaultServerIdleTimeout is the default ServerConfig.IdleTimeout, equal
// to the HTTP servers' keep-alive idle timeout.
const DefaultServerIdleTimeout = 2 * time.Minute

// ServerInfo is what a client needs to reach a server.
type ServerInfo struct {
	Host      string   `json:"host"`       // listening address ("" = all)
	Port      int      `json:"port"`       // TLS port, TCP and UDP
	PlainPort int      `json:"plain_port"` // cleartext HTTP/1.1 port (0 when h1c is not served)
	Protocols []string `json:"protocols"`  // protocols served
	SPKI      string   `json:"spki"`       // base64 SHA-256 of the leaf's SubjectPublicKeyInfo
	CAPEM     string   `json:"ca_pem,omitempty"`
	Names     []string `json:"names"` // SANs of the leaf certificate
	PID       int      `json:"pid"`
	// Impl names the server implementation (its stack's name in the
	// registry, package peers) and Version its release ("aioquic 1.7.2",
	// "caddy 2.6.2", "quicbench (quic-go v0.59.0)").
	Impl    string `json:"impl"`
	Version string `json:"version"`
	// Settings holds what a peer implementation was configured with that
	// the statistics do not show, e.g. aioquic's "cc" and
	// "max_datagram_size", a files server's "tcp_cc" (docs/peers.md).
	Settings map[string]string `json:"settings,omitempty"`
	// Replay names the archives a replay serves, and ReplayAddrs the
	// addresses its origins listen on (ServerConfig.Replay).
	Replay      []string `json:"replay,omitempty"`
	ReplayAddrs []string `json:"replay_addrs,omitempty"`
}

// Server is a running quicbench server.
type Server struct {
	cfg   ServerConfig
	info  ServerInfo
	logf  func(string, ...any)
	roots []*os.Root

	tlsConf  *tls.Config
	tlsTCP   *tls.Config  // tlsConf with the TCP ALPNs
	udp      *net.UDPConn // until the QUIC server owns it
	tcpLn    net.Listener // TLS over TCP: h1, h2, tcp
	plainLn  net.Listener // h1c
	httpTLS  *http.Server
	httpLn   *chanListener
	plain    *http.Server
	quic     *h3.Server
	serveTCP map[string]bool

	book *statsBook

	ca      *certs.CA       // nil with a given certificate
	leaf    tls.Certificate // the server's own leaf
	origins []*originServer // a replay's listeners (origins.go)

	mu     sync.Mutex
	closed bool
	conns  map[*trackedConn]struct{}
	wg     sync.WaitGroup
}

func (c ServerConfig) serves(p string) bool {
	return c.Protocols == nil || slices.Contains(c.Protocols, p)
}

// StartServer starts listening on every configured protocol and returns
// once all listeners are up. Close releases everything.
func StartServer(ctx context.Context, cfg ServerConfig) (*Server, error) {
	for _, p := range cfg.Protocols {
		if !slices.Contains(model.Protocols, p) {
			return nil, fmt.Errorf("endpoint: unknown protocol %q (known: %v)", p, model.Protocols)
		}
	}
	if cfg.Protocols != nil && len(cfg.Protocols) == 0 {
		return nil, errors.New("endpoint: ServerConfig.Protocols is empty")
	}
	if cfg.Host != "" {
		if _, err := netip.ParseAddr(cfg.Host); err != nil {
			return nil, fmt.Errorf("endpoint: listen address %q is not an IP address", cfg.Host)
		}
	}
	if cfg.Port < 0 || cfg.Port > 65535 || cfg.PlainPort < 0 || cfg.PlainPort > 65535 {
		return nil, fmt.Errorf("endpoint: ports must be 0..65535 (got %d and %d)", cfg.Port, cfg.PlainPort)
	}
	s := &Server{
		cfg:   cfg,
		logf:  cfg.Logf,
		book:  newStatsBook(4096),
		conns: map[*trackedConn]struct{}{},
	}
	if s.cfg.IdleTimeout <= 0 {
		s.cfg.IdleTimeout = DefaultServerIdleTimeout
	}
	if s.logf == nil {
		s.logf = func(string, ...any) {}
	}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.setupCert(); err != nil {
		return nil, err
	}
	handler, err := s.setupHandler()
	if err != nil {
		return nil, err
	}
	if err := s.listen(); err != nil {
		return nil, err
	}
	s.startHTTP(handler)
	if err := s.startOrigins(); err != nil {
		return nil, err
	}
	if cfg.serves(model.ProtoH3) || cfg.serves(model.ProtoQUIC) {
		var h http.Handler
		if cfg.serves(model.ProtoH3) {
			h = handler
		}
		s.quic, err = h3.Listen(s.udp, h3.ServerConfig{
			TLS:      s.tlsConf,
			Handler:  h,
			Raw:      cfg.serves(model.ProtoQUIC),
			QlogDir:  cfg.QlogDir,
			NoEvents: cfg.NoQUICEvents,
			// As patient as the TLS/TCP side, so that the client's
			// handshake limit, not the server, ends a slow handshake.
			HandshakeTimeout: serverHandshakeTimeout,
			OnAccept: func(remote string, live func() model.TransportStats) func(model.TransportStats) {
				ref := s.book.open("quic", remote)
				s.book.watch(ref, func(context.Context) (model.TransportStats, error) { return live(), nil })
				return func(st model.TransportStats) { s.book.put(ref, st) }
			},
			OnHandshake: func(remote string, st h3.State) {
				s.onConn(ConnEvent{Event: "open", Kind: "quic", Remote: remote, ALPN: st.TLS.NegotiatedProtocol, Resumed: st.TLS.DidResume, ZeroRTT: st.Used0RTT})
			},
			OnEnd: func(remote string) { s.onConn(ConnEvent{Event: "close", Kind: "quic", Remote: remote}) },
			Logf:  s.logf,
		})
		if err != nil {
			return nil, fmt.Errorf("endpoint: QUIC: %w", err)
		}
		s.udp = nil // owned by the QUIC server now
	}
	for _, p := range model.Protocols {
		if cfg.serves(p) {
			s.info.Protocols = append(s.info.Protocols, p)
		}
	}
	s.info.PID = os.Getpid()
	s.info.Impl, s.info.Version = peers.Own, builtinVersion()
	ok = true
	return s, nil
}

// builtinVersion describes quicbench's own server: its module version and
// the quic-go it is built with, from the build information.
func builtinVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "quicbench"
	}
	v := "quicbench"
	if mv := bi.Main.Version; mv != "" && mv != "(devel)" {
		v += " " + mv
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/quic-go/quic-go" {
			v += " (quic-go " + d.Version + ")"
		}
	}
	return v
}

func (s *Server) setupCert() error {
	cert, ca, err := issueServerCert(&s.info, s.cfg.Certificate, s.cfg.Host, s.cfg.Names)
	if err != nil {
		return err
	}
	s.tlsConf = serverTLSConfig(cert, s.cfg.KeyLog)
	s.ca, s.leaf = ca, cert
	return nil
}

// serverCert returns given, or when nil a certificate issued by a fresh CA
// for host (every local address when "") and names, and records its
// identity (SPKI, names, CA) in info.
func serverCert(info *ServerInfo, given *tls.Certificate, host string, extra []string) (tls.Certificate, error) {
	cert, _, err := issueServerCert(info, given, host, extra)
	return cert, err
}

// issueServerCert is serverCert that also returns the CA it made (nil for
// a given certificate).
func issueServerCert(info *ServerInfo, given *tls.Certificate, host string, extra []string) (tls.Certificate, *certs.CA, error) {
	var cert tls.Certificate
	var ca *certs.CA
	if given != nil {
		cert = *given
	} else {
		var err error
		ca, err = certs.NewCA()
		if err != nil {
			return cert, nil, err
		}
		names := []string{"localhost", "127.0.0.1", "::1"}
		if host != "" {
			names = append(names, host)
		} else {
			names = append(names, localAddrs()...)
		}
		names = append(names, extra...)
		slices.Sort(names)
		names = slices.Compact(names)
		cert, err = ca.Issue(names...)
		if err != nil {
			return cert, nil, err
		}
		info.CAPEM = string(ca.CertPEM())
	}
	spki, err := certs.LeafSPKIHash(cert)
	if err != nil {
		return cert, nil, err
	}
	info.SPKI = spki
	if cert.Leaf != nil {
		info.Names = append(info.Names, cert.Leaf.DNSNames...)
		for _, ip := range cert.Leaf.IPAddresses {
			info.Names = append(info.Names, ip.String())
		}
	}
	return cert, ca, nil
}

// localAddrs lists the unicast addresses of the local interfaces.
func localAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLinkLocalUnicast() {
			out = append(out, p.Addr().String())
		}
	}
	return out
}

func (s *Server) setupHandler() (http.Handler, error) {
	sites := map[string]*os.Root{}
	for name, dir := range s.cfg.Sites {
		if err := validSiteName(name); err != nil {
			return nil, fmt.Errorf("endpoint: site %q: %w", name, err)
		}
		root, err := openRoot("site "+name, dir)
		if err != nil {
			return nil, fmt.Errorf("endpoint: %w", err)
		}
		s.roots = append(s.roots, root)
		sites[name] = root
	}
	var files *os.Root
	if s.cfg.FilesDir != "" {
		root, err := openRoot("files", s.cfg.FilesDir)
		if err != nil {
			return nil, fmt.Errorf("endpoint: %w", err)
		}
		s.roots = append(s.roots, root)
		files = root
	}
	return newHandler(sites, files), nil
}

// listen binds the TCP, UDP and cleartext sockets.
func (s *Server) listen() error {
	cfg := s.cfg
	needTCP := cfg.serves(model.ProtoH1) || cfg.serves(model.ProtoH2) || cfg.serves(model.ProtoTCP)
	needUDP := cfg.serves(model.ProtoH3) || cfg.serves(model.ProtoQUIC)
	host := cfg.Host
	var err error
	for attempt := 0; ; attempt++ {
		err = s.bindTLSPort(host, cfg.Port, needTCP, needUDP)
		if err == nil || cfg.Port != 0 || attempt == 20 || !errors.Is(err, errUDPTaken) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("endpoint: %w", err)
	}
	if cfg.serves(model.ProtoH1C) {
		ln, err := s.listenConfig().Listen(context.Background(), "tcp", net.JoinHostPort(host, strconv.Itoa(cfg.PlainPort)))
		if err != nil {
			return fmt.Errorf("endpoint: cleartext listener: %w", err)
		}
		s.plainLn = ln
		s.info.PlainPort = ln.Addr().(*net.TCPAddr).Port
	}
	s.info.Host = host
	return nil
}

var errUDPTaken = errors.New("UDP port unavailable")

func (s *Server) listenConfig() *net.ListenConfig {
	return &net.ListenConfig{Control: sockopt.CongestionControl(s.cfg.CongestionControl)}
}

// bindTLSPort binds TCP and/or UDP on the same port. With port 0 the TCP
// port is chosen by the kernel and UDP must follow; the caller retries when
// that UDP port is taken.
func (s *Server) bindTLSPort(host string, port int, needTCP, needUDP bool) error {
	if needTCP {
		ln, err := s.listenConfig().Listen(context.Background(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return fmt.Errorf("TLS/TCP listener: %w", err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		s.tcpLn = ln
	}
	if needUDP {
		ua, err := net.ResolveUDPAddr("udp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err == nil {
			s.udp, err = net.ListenUDP("udp", ua)
		}
		if err != nil {
			if s.tcpLn != nil {
				_ = s.tcpLn.Close()
				s.tcpLn = nil
			}
			return fmt.Errorf("QUIC UDP socket on port %d: %w: %w", port, errUDPTaken, err)
		}
		port = s.udp.LocalAddr().(*net.UDPAddr).Port
	}
	s.info.Port = port
	return nil
}

func (s *Server) startHTTP(handler http.Handler) {
	errLog := log.New(logfWriter(s.logf), "", 0)
	h := handler
	if s.cfg.serves(model.ProtoH3) {
		altSvc := fmt.Sprintf(`h3=":%d"; ma=86400`, s.info.Port)
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Alt-Svc", altSvc)
			handler.ServeHTTP(w, r)
		})
	}
	if s.tcpLn != nil {
		var protos []string
		s.serveTCP = map[string]bool{}
		if s.cfg.serves(model.ProtoH2) {
			protos = append(protos, "h2")
			s.serveTCP["h2"] = true
		}
		if s.cfg.serves(model.ProtoH1) {
			protos = append(protos, "http/1.1")
			s.serveTCP["http/1.1"] = true
		}
		if s.cfg.serves(model.ProtoTCP) {
			protos = append(protos, raw.ALPN)
			s.serveTCP[raw.ALPN] = true
		}
		s.tlsTCP = s.tlsConf.Clone()
		s.tlsTCP.NextProtos = protos
		var p http.Protocols
		p.SetHTTP1(true)
		p.SetHTTP2(s.cfg.serves(model.ProtoH2))
		s.httpLn = newChanListener(s.tcpLn.Addr())
		s.httpTLS = &http.Server{
			Handler:           h,
			Protocols:         &p,
			HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000, MaxReceiveBufferPerConnection: h3.ConnWindow, MaxReceiveBufferPerStream: h3.StreamWindow},
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          errLog,
		}
		s.wg.Add(2)
		go func() { defer s.wg.Done(); _ = s.httpTLS.Serve(s.httpLn) }()
		go func() { defer s.wg.Done(); s.acceptTLS() }()
	}
	if s.plainLn != nil {
		var p http.Protocols
		p.SetHTTP1(true)
		s.plain = &http.Server{
			Handler:           h,
			Protocols:         &p,
			ReadHeaderTimeout: 30 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          errLog,
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = s.plain.Serve(&trackingListener{Listener: s.plainLn, s: s})
		}()
	}
}

type logfWriter func(string, ...any)

func (f logfWriter) Write(p []byte) (int, error) {
	f("%s", string(p))
	return len(p), nil
}

// acceptTLS accepts TLS/TCP connections and hands each, after its
// handshake, to the HTTP server or the raw protocol by negotiated ALPN.
func (s *Server) acceptTLS() {
	for {
		c, err := s.tcpLn.Accept()
		if err != nil {
			return
		}
		tc := s.track(c)
		if tc == nil {
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.dispatchTLS(tc)
		}()
	}
}

const serverHandshakeTimeout = 30 * time.Second

func (s *Server) dispatchTLS(c *trackedConn) {
	tc := tls.Server(c, s.tlsTCP)
	_ = c.SetDeadline(time.Now().Add(serverHandshakeTimeout))
	if err := tc.Handshake(); err != nil {
		_ = tc.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	cs := tc.ConnectionState()
	proto := cs.NegotiatedProtocol
	c.opened.Store(true)
	s.onConn(ConnEvent{Event: "open", Kind: "tcp", Remote: c.RemoteAddr().String(), ALPN: proto, Resumed: cs.DidResume})
	switch {
	case proto == raw.ALPN:
		if err := raw.Serve(&idleConn{Conn: tc, idle: s.cfg.IdleTimeout}, false); err != nil && !isNetClosed(err) {
			s.logf("raw TCP from %s: %v", c.RemoteAddr(), err)
		}
		_ = tc.Close()
	case proto == "h2" || proto == "http/1.1" || (proto == "" && s.serveTCP["http/1.1"]):
		s.httpLn.push(tc)
	default:
		_ = tc.Close()
	}
}

// idleConn bounds every Read and Write of a connection: each must make
// progress within idle, or it fails with os.ErrDeadlineExceeded.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *idleConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

func isNetClosed(err error) bool {
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, os.ErrDeadlineExceeded)
}

// Info returns the server's addresses, protocols and certificate identity.
func (s *Server) Info() ServerInfo { return s.info }

// Addr returns "host:port" of the TLS port for the given host (the listen
// address when empty, or 127.0.0.1 when listening on all addresses).
func (s *Server) Addr() string { return net.JoinHostPort(s.dialHost(), strconv.Itoa(s.info.Port)) }

// PlainAddr returns "host:port" of the cleartext HTTP/1.1 port.
func (s *Server) PlainAddr() string {
	return net.JoinHostPort(s.dialHost(), strconv.Itoa(s.info.PlainPort))
}

func (s *Server) dialHost() string {
	if s.info.Host == "" {
		return "127.0.0.1"
	}
	return s.info.Host
}

// CPU returns the CPU time of the server's process (getrusage
// RUSAGE_SELF): meaningful per sample when the server runs in its own
// process, as `quicbench serve` does.
func (s *Server) CPU() (CPUTime, error) { return ProcessCPU() }

// ConnStats waits until the server-side connection from the client address
// addr ("ip:port", as the client saw its local address) of the given kind
// ("tcp" or "quic") has ended, and returns its final transport statistics,
// or ctx's error. The statistics are those of the latest connection the
// server accepted from addr: a new connection from the same address
// discards what an earlier one left, and each record is handed out once
// (a second call waits for the next connection from addr to end). When
// ctx's deadline passes while a QUIC connection from addr is open (its
// client's close lost), its statistics of that moment come with
// ErrStillOpen.
func (s *Server) ConnStats(ctx context.Context, kind, addr string) (model.TransportStats, error) {
	return s.book.wait(ctx, kind, addr)
}

// Close stops every listener, closes every connection and waits for the
// server's goroutines. It is safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var errs []error
	for _, o := range s.origins {
		errs = append(errs, o.close())
	}
	if s.tcpLn != nil {
		errs = append(errs, ignoreClosed(s.tcpLn.Close()))
	}
	if s.plainLn != nil {
		errs = append(errs, ignoreClosed(s.plainLn.Close()))
	}
	if s.httpLn != nil {
		_ = s.httpLn.Close()
	}
	if s.httpTLS != nil {
		errs = append(errs, ignoreClosed(s.httpTLS.Close()))
	}
	if s.plain != nil {
		errs = append(errs, ignoreClosed(s.plain.Close()))
	}
	for _, c := range conns {
		_ = c.Close()
	}
	if s.quic != nil {
		errs = append(errs, s.quic.Close())
	}
	if s.udp != nil {
		errs = append(errs, s.udp.Close())
	}
	s.wg.Wait()
	for _, r := range s.roots {
		_ = r.Close()
	}
	return errors.Join(errs...)
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// trackedConn is a server-side TCP connection that records its TCP_INFO
// when closed and is closed by Server.Close.
type trackedConn struct {
	*net.TCPConn
	s      *Server
	ref    bookRef
	once   sync.Once
	err    error
	opened atomic.Bool // its TLS handshake completed (ServerConfig.OnConn saw it open)
}

func (s *Server) track(c net.Conn) *trackedConn {
	t, ok := c.(*net.TCPConn)
	if !ok {
		_ = c.Close()
		return nil
	}
	tc := &trackedConn{TCPConn: t, s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = t.Close()
		return nil
	}
	tc.ref = s.book.open("tcp", t.RemoteAddr().String())
	s.conns[tc] = struct{}{}
	return tc
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		if st, err := tcpStats(c.TCPConn); err == nil {
			c.s.book.put(c.ref, st)
		} else {
			c.s.book.abandon(c.ref)
		}
		c.s.mu.Lock()
		delete(c.s.conns, c)
		c.s.mu.Unlock()
		c.err = c.TCPConn.Close()
		if c.opened.Load() {
			c.s.onConn(ConnEvent{Event: "close", Kind: "tcp", Remote: c.RemoteAddr().String()})
		}
	})
	return c.err
}

type trackingListener struct {
	net.Listener
	s *Server
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.s.track(c); tc != nil {
			return tc, nil
		}
	}
}

// chanListener is a net.Listener fed with connections whose TLS handshake
// the dispatcher already completed.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) {
	select {
	case l.ch <- c:
	case <-l.done:
		_ = c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// statsBook keeps the final transport statistics of connections that
// ended, by kind and client address, until they are asked for.
//
// Client ports are reused (QUIC clients bind a random UDP port per
// connection), so an address names a sequence of connections over time:
// each accepted connection opens a new generation of its key, which
// discards whatever an earlier connection from that address left, and only
// the newest generation's statistics are kept. A record is handed out once.
//
// A QUIC connection ends on the server when the client's CONNECTION_CLOSE
// arrives; when the link loses that packet, the server sees nothing more
// until its idle timeout. A connection watched with a reader (watch) is
// then read while still open when a wait gives up, so that a lost close
// costs the sample its wait, not its server statistics.
type statsBook struct {
	mu      sync.Mutex
	limit   int
	gen     uint64
	live    map[string]uint64     // key -> generation of the newest accepted connection, until it ends
	done    map[string]bookRecord // ended, not yet asked for
	order   []bookRef             // done records by age, for the limit (may hold stale refs)
	waiters map[string][]chan model.TransportStats
	readers map[string]liveReader // key -> reader of its live connection, same generation
}

// liveReader reads the statistics of a connection that has not ended.
type liveReader struct {
	gen  uint64
	read func(context.Context) (model.TransportStats, error)
}

// ErrStillOpen comes with statistics that were read from a connection that
// had not ended when the wait for its end gave up (on QUIC, typically
// because the link lost the client's CONNECTION_CLOSE): the figures are
// valid, as of that moment, and the caller may want to say so.
var ErrStillOpen = errors.New("the connection had not ended: statistics read while it was open")

// liveReadTimeout bounds reading an open connection's statistics once a
// wait gave up (a program peer answers over its standard streams).
const liveReadTimeout = 500 * time.Millisecond

// bookRef names one connection: its key and generation.
type bookRef struct {
	key string
	gen uint64
}

type bookRecord struct {
	gen uint64
	st  model.TransportStats
}

func newStatsBook(limit int) *statsBook {
	return &statsBook{
		limit:   limit,
		live:    map[string]uint64{},
		done:    map[string]bookRecord{},
		waiters: map[string][]chan model.TransportStats{},
		readers: map[string]liveReader{},
	}
}

func bookKey(kind, addr string) string {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		addr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
	}
	return kind + " " + addr
}

// open registers a new connection from addr, superseding any earlier one,
// and returns its reference for put or abandon.
func (b *statsBook) open(kind, addr string) bookRef {
	k := bookKey(kind, addr)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gen++
	b.live[k] = b.gen
	delete(b.done, k) // an earlier connection's record: stale now
	delete(b.readers, k)
	return bookRef{key: k, gen: b.gen}
}

// watch gives the open connection ref a reader of its statistics while it
// has not ended, for waits that give up on its end.
func (b *statsBook) watch(ref bookRef, read func(context.Context) (model.TransportStats, error)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live[ref.key] == ref.gen {
		b.readers[ref.key] = liveReader{gen: ref.gen, read: read}
	}
}

// put records the final statistics of the connection ref, unless a newer
// connection from the same address was accepted meanwhile. Waiters receive
// them at once; otherwise they are kept for the next wait.
func (b *statsBook) put(ref bookRef, st model.TransportStats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live[ref.key] != ref.gen {
		return // superseded: the address now belongs to a newer connection
	}
	delete(b.live, ref.key)
	delete(b.readers, ref.key)
	if ws := b.waiters[ref.key]; len(ws) > 0 {
		for _, w := range ws {
			w <- st // buffered, one value each
		}
		delete(b.waiters, ref.key)
		return
	}
	b.done[ref.key] = bookRecord{gen: ref.gen, st: st}
	b.order = append(b.order, ref)
	for len(b.done) > b.limit && len(b.order) > 0 {
		o := b.order[0]
		b.order = b.order[1:]
		if r, ok := b.done[o.key]; ok && r.gen == o.gen {
			delete(b.done, o.key)
		}
	}
	if len(b.order) > 2*b.limit+64 { // drop refs of records already handed out
		kept := b.order[:0]
		for _, o := range b.order {
			if r, ok := b.done[o.key]; ok && r.gen == o.gen {
				kept = append(kept, o)
			}
		}
		b.order = kept
	}
}

// abandon forgets the connection ref when its statistics cannot be read.
func (b *statsBook) abandon(ref bookRef) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.live[ref.key] == ref.gen {
		delete(b.live, ref.key)
		delete(b.readers, ref.key)
	}
}

// wait returns (and forgets) the record of the connection from addr that
// ended last, or waits for the next one to end. When ctx's deadline passes
// first and that connection is open with a reader (watch), it returns what
// the reader reads with ErrStillOpen.
func (b *statsBook) wait(ctx context.Context, kind, addr string) (model.TransportStats, error) {
	k := bookKey(kind, addr)
	b.mu.Lock()
	if r, ok := b.done[k]; ok {
		delete(b.done, k)
		b.mu.Unlock()
		return r.st, nil
	}
	ch := make(chan model.TransportStats, 1)
	b.waiters[k] = append(b.waiters[k], ch)
	b.mu.Unlock()
	select {
	case st := <-ch:
		return st, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	ws := b.waiters[k]
	for i, w := range ws {
		if w == ch {
			b.waiters[k] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(b.waiters[k]) == 0 {
		delete(b.waiters, k)
	}
	select {
	case st := <-ch: // delivered just before we gave up
		b.mu.Unlock()
		return st, nil
	default:
	}
	reader, open := b.readers[k]
	open = open && b.live[k] == reader.gen
	b.mu.Unlock()
	gaveUp := fmt.Errorf("no statistics for %s connection from %s: %w", kind, addr, ctx.Err())
	if !open || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return model.TransportStats{}, gaveUp
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveReadTimeout)
	defer cancel()
	st, err := reader.read(rctx)
	if err == nil {
		return st, ErrStillOpen
	}
	// It may have ended meanwhile (a program peer prints its end before
	// answering that the connection is gone).
	b.mu.Lock()
	defer b.mu.Unlock()
	if r, ok := b.done[k]; ok && r.gen == reader.gen {
		delete(b.done, k)
		return r.st, nil
	}
	return model.TransportStats{}, fmt.Errorf("%w; reading it open: %v", gaveUp, err)
}
