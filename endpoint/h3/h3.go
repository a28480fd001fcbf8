// Package h3 is quicbench's only importer of quic-go: the QUIC side of the
// server (HTTP/3 and the raw protocol on one UDP socket, dispatched by ALPN)
// and of the client (a QUIC connection that carries HTTP/3 requests or raw
// streams), with per-connection transport statistics taken from quic-go's
// ConnectionStats and its qlog event stream.
package h3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/model"
)

// ALPN of HTTP/3.
const ALPN = http3.NextProtoH3

// MethodGet0RTT is the request method that makes the HTTP/3 client send a
// GET in 0-RTT, before the handshake completes (the request goes out as GET).
const MethodGet0RTT = http3.MethodGet0RTT

// Flow-control windows, equal for client and server and matched by the
// HTTP/2 settings of package endpoint, so that flow control is not what
// limits either protocol below a bandwidth-delay product of 16 MiB. QUIC
// starts with them (no auto-tuning from quic-go's 512 KiB default), as
// HTTP/2 in Go does: its windows are fixed at these sizes.
const (
	StreamWindow = 16 << 20
	ConnWindow   = 32 << 20
)

// quicConfig returns the quic.Config both sides use. handshake is the
// handshake limit the caller wants (0: quic-go's default, which abandons a
// handshake after 5 s without a packet from the peer or 10 s in all).
func quicConfig(handshake, idle time.Duration) *quic.Config {
	c := &quic.Config{
		InitialStreamReceiveWindow:     StreamWindow,
		MaxStreamReceiveWindow:         StreamWindow,
		InitialConnectionReceiveWindow: ConnWindow,
		MaxConnectionReceiveWindow:     ConnWindow,
		MaxIncomingStreams:             1000,
		MaxIncomingUniStreams:          100,
	}
	if handshake > 0 {
		// quic-go abandons a handshake when no packet arrived from the
		// peer for HandshakeIdleTimeout, and in any case after twice that.
		// Setting it to the limit makes quic-go give up on a silent peer
		// at the limit, neither before it (its 5 s default would cut a
		// longer limit short) nor long after; a client's dial context
		// bounds the whole handshake to the limit.
		c.HandshakeIdleTimeout = handshake
	}
	if idle > 0 {
		c.MaxIdleTimeout = idle
	}
	return c
}

// ServerConfig configures the QUIC side of a server.
type ServerConfig struct {
	// TLS is the server's TLS configuration (TLS 1.3, certificate, key
	// log). Listen clones it and sets NextProtos to the protocols served.
	TLS *tls.Config
	// Handler serves HTTP/3; nil disables HTTP/3.
	Handler http.Handler
	// Raw enables the raw protocol (ALPN raw.ALPN), one request per stream.
	Raw bool
	// QlogDir, when not empty, receives one qlog file per connection.
	QlogDir string
	// NoEvents turns quic-go's event tracing off (unless QlogDir is set):
	// PTOCount, CongestionEvents and CongestionStateChanges are then
	// model.NotMeasured and Retransmits counts every packet declared lost.
	// Tracing makes quic-go build an event per packet, which costs CPU.
	NoEvents bool
	// IdleTimeout closes connections idle that long (0: quic-go's 30 s).
	IdleTimeout time.Duration
	// HandshakeTimeout abandons a handshake after that long without a
	// packet from the client, or twice that in all (0: quic-go's 5 s).
	HandshakeTimeout time.Duration
	// OnAccept, if set, is called with the client's address ("ip:port")
	// when a connection is accepted, and live, which reads that
	// connection's statistics at any time; the function it returns, if not
	// nil, receives the connection's final statistics when it ends.
	OnAccept func(remote string, live func() model.TransportStats) (onClose func(model.TransportStats))
	// OnConn, if set, is called for every accepted connection with the
	// server name the client sent (SNI) and the negotiated ALPN.
	OnConn func(serverName, alpn string)
	// OnHandshake, if set, is called with the client's address and what
	// the connection negotiated once its handshake completes; OnEnd, if
	// set, when a connection whose handshake completed ends.
	OnHandshake func(remote string, st State)
	OnEnd       func(remote string)
	// Logf reports errors that have no caller to return to.
	Logf func(format string, args ...any)
}

// Server serves HTTP/3 and raw QUIC on one UDP socket.
type Server struct {
	cfg  ServerConfig
	tr   *quic.Transport
	ln   *quic.EarlyListener
	h3   *http3.Server
	done chan struct{}

	mu      sync.Mutex
	conns   map[*quic.Conn]struct{}
	wg      sync.WaitGroup
	written sync.WaitGroup // qlog files being written
}

// Listen starts serving QUIC on pc (which the server then owns).
func Listen(pc net.PacketConn, cfg ServerConfig) (*Server, error) {
	if cfg.TLS == nil {
		return nil, errors.New("h3: ServerConfig.TLS is required")
	}
	var protos []string
	if cfg.Handler != nil {
		protos = append(protos, ALPN)
	}
	if cfg.Raw {
		protos = append(protos, raw.ALPN)
	}
	if len(protos) == 0 {
		return nil, errors.New("h3: neither HTTP/3 nor raw QUIC enabled")
	}
	s := &Server{cfg: cfg, done: make(chan struct{}), conns: map[*quic.Conn]struct{}{}}
	if cfg.Handler != nil {
		s.h3 = &http3.Server{Handler: cfg.Handler, IdleTimeout: cfg.IdleTimeout}
	}
	tlsConf := cfg.TLS.Clone()
	tlsConf.NextProtos = protos
	s.tr = &quic.Transport{
		Conn: pc,
		ConnContext: func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
			return context.WithValue(ctx, countersKey{}, new(counters)), nil
		},
	}
	qc := quicConfig(cfg.HandshakeTimeout, cfg.IdleTimeout)
	qc.Allow0RTT = true
	if !cfg.NoEvents || cfg.QlogDir != "" {
		qc.Tracer = tracer(cfg.QlogDir, nil, &s.written, cfg.Logf)
	}
	ln, err := s.tr.ListenEarly(tlsConf, qc)
	if err != nil {
		_ = s.tr.Close()
		return nil, fmt.Errorf("h3: listen: %w", err)
	}
	s.ln = ln
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.Accept(context.Background())
		if err != nil {
			return
		}
		s.mu.Lock()
		select {
		case <-s.done:
			s.mu.Unlock()
			_ = conn.CloseWithError(0, "server closing")
			return
		default:
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		if s.cfg.OnConn != nil {
			st := conn.ConnectionState().TLS
			s.cfg.OnConn(st.ServerName, st.NegotiatedProtocol)
		}
		var onClose func(model.TransportStats)
		if s.cfg.OnAccept != nil {
			onClose = s.cfg.OnAccept(conn.RemoteAddr().String(), func() model.TransportStats {
				c, _ := conn.Context().Value(countersKey{}).(*counters)
				return statsOf(conn, c)
			})
		}
		go s.handle(conn, onClose)
	}
}

func (s *Server) handle(conn *quic.Conn, onClose func(model.TransportStats)) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, conn)
		s.mu.Unlock()
	}()
	if s.cfg.OnHandshake != nil || s.cfg.OnEnd != nil {
		s.wg.Add(1)
		go s.watchHandshake(conn)
	}
	switch conn.ConnectionState().TLS.NegotiatedProtocol {
	case ALPN:
		if err := s.h3.ServeQUICConn(conn); err != nil && !isClosed(err) {
			s.logf("h3: serving %s: %v", conn.RemoteAddr(), err)
		}
	case raw.ALPN:
		s.serveRaw(conn)
	default: // cannot happen: TLS refuses ALPNs that are not configured
		_ = conn.CloseWithError(0, "no application protocol")
	}
	<-conn.Context().Done()
	if onClose != nil {
		c, _ := conn.Context().Value(countersKey{}).(*counters)
		onClose(statsOf(conn, c))
	}
}

// watchHandshake reports conn's handshake (OnHandshake) when it completes
// and, if it did, its end (OnEnd).
func (s *Server) watchHandshake(conn *quic.Conn) {
	defer s.wg.Done()
	remote := conn.RemoteAddr().String()
	select {
	case <-conn.HandshakeComplete():
	case <-conn.Context().Done():
		return
	}
	if s.cfg.OnHandshake != nil {
		cs := conn.ConnectionState()
		s.cfg.OnHandshake(remote, State{TLS: cs.TLS, Used0RTT: cs.Used0RTT, Version: cs.Version.String()})
	}
	<-conn.Context().Done()
	if s.cfg.OnEnd != nil {
		s.cfg.OnEnd(remote)
	}
}

func (s *Server) serveRaw(conn *quic.Conn) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		str, err := conn.AcceptStream(context.Background())
		if err != nil {
			return
		}
		wg.Go(func() {
			if err := raw.Serve(str, true); err != nil {
				str.CancelRead(1)
				str.CancelWrite(1)
				if !isClosed(err) {
					s.logf("h3: raw stream from %s: %v", conn.RemoteAddr(), err)
				}
				return
			}
			_ = str.Close()
		})
	}
}

func isClosed(err error) bool {
	if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return true
	}
	var ae *quic.ApplicationError
	var ie *quic.IdleTimeoutError
	var te *quic.TransportError
	var se *quic.StreamError
	return errors.As(err, &ae) || errors.As(err, &ie) || errors.As(err, &te) || errors.As(err, &se)
}

// Addr returns the local UDP address.
func (s *Server) Addr() net.Addr { return s.tr.Conn.LocalAddr() }

// Close closes every connection (with a CONNECTION_CLOSE, so clients fail
// at once), the listener and the socket, and waits for the handlers.
func (s *Server) Close() error {
	s.mu.Lock()
	select {
	case <-s.done:
		s.mu.Unlock()
		return nil
	default:
	}
	close(s.done)
	conns := make([]*quic.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.CloseWithError(0x100, "server closing") // H3_NO_ERROR-range code, means "shutting down"
	}
	err := s.ln.Close()
	if s.h3 != nil {
		_ = s.h3.Close()
	}
	if cerr := s.tr.Close(); err == nil {
		err = cerr
	}
	if cerr := s.tr.Conn.Close(); err == nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	s.wg.Wait()
	waitQlog(&s.written)
	return err
}

// qlogFlushLimit bounds how long closing waits for qlog files.
const qlogFlushLimit = 5 * time.Second

func waitQlog(wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(qlogFlushLimit):
	}
}

// DialConfig configures a client connection.
type DialConfig struct {
	// TLS is the client's TLS configuration (roots, server name, session
	// cache for resumption, key log). Dial clones it and sets NextProtos
	// to ALPN.
	TLS *tls.Config
	// ALPN is the one application protocol offered: ALPN (HTTP/3) or
	// raw.ALPN.
	ALPN string
	// Early dials with 0-RTT: with a resumable session in TLS's session
	// cache, Dial returns once 0-RTT keys exist, before the handshake
	// completes. Without one it behaves like a normal dial.
	Early bool
	// IdleTimeout closes the connection after that long without packets
	// (0: quic-go's 30 s).
	IdleTimeout time.Duration
	// HandshakeTimeout is the handshake limit: quic-go abandons the
	// handshake when no packet arrived from the server for that long, and
	// in any case after twice that (0: quic-go's 5 s). Dial's ctx can bound
	// the handshake more tightly; give it the same limit for an exact one.
	// With Early, the handshake continues after Dial returned, bounded by
	// this alone.
	HandshakeTimeout time.Duration
	// QlogDir, when not empty, receives the connection's qlog file.
	QlogDir string
	// NoEvents turns quic-go's event tracing off (unless QlogDir is set);
	// see ServerConfig.NoEvents.
	NoEvents bool
	// Logf reports qlog file errors.
	Logf func(format string, args ...any)
}

// Conn is a client QUIC connection.
type Conn struct {
	conn    *quic.Conn
	tr      *quic.Transport
	c       *counters
	hc      *http3.ClientConn
	written sync.WaitGroup // qlog file being written
}

// Dial opens a QUIC connection to addr ("host:port") from a fresh UDP socket
// (so no state is shared with other connections). The handshake is bounded
// by ctx and by cfg.HandshakeTimeout.
func Dial(ctx context.Context, addr string, cfg DialConfig) (*Conn, error) {
	if cfg.TLS == nil {
		return nil, errors.New("h3: DialConfig.TLS is required")
	}
	if cfg.ALPN != ALPN && cfg.ALPN != raw.ALPN {
		return nil, fmt.Errorf("h3: unknown ALPN %q (want %q or %q)", cfg.ALPN, ALPN, raw.ALPN)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("h3: address %q: %w", addr, err)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("h3: resolving %q: %w", host, err)
	}
	p, err := net.LookupPort("udp", port)
	if err != nil {
		return nil, fmt.Errorf("h3: port %q: %w", port, err)
	}
	raddr := &net.UDPAddr{IP: ips[0].Unmap().AsSlice(), Port: p, Zone: ips[0].Zone()}
	network := "udp4"
	if ips[0].Unmap().Is6() {
		network = "udp6"
	}
	// Bind to the source address the route to the server uses (found by a
	// connect on a throw-away socket, which sends nothing), so that the
	// recorded local address is the one the server sees.
	var laddr *net.UDPAddr
	if probe, err := net.DialUDP(network, nil, raddr); err == nil {
		laddr = &net.UDPAddr{IP: probe.LocalAddr().(*net.UDPAddr).IP}
		_ = probe.Close()
	}
	udp, err := net.ListenUDP(network, laddr)
	if err != nil {
		return nil, fmt.Errorf("h3: client socket: %w", err)
	}
	c := &Conn{tr: &quic.Transport{Conn: udp}, c: new(counters)}
	tlsConf := cfg.TLS.Clone()
	tlsConf.NextProtos = []string{cfg.ALPN}
	qc := quicConfig(cfg.HandshakeTimeout, cfg.IdleTimeout)
	if !cfg.NoEvents || cfg.QlogDir != "" {
		qc.Tracer = tracer(cfg.QlogDir, c.c, &c.written, cfg.Logf)
	} else {
		c.c = nil
	}
	if cfg.Early {
		c.conn, err = c.tr.DialEarly(ctx, raddr, tlsConf, qc)
	} else {
		c.conn, err = c.tr.Dial(ctx, raddr, tlsConf, qc)
	}
	if err != nil {
		_ = c.tr.Close()
		_ = udp.Close()
		return nil, err
	}
	if cfg.ALPN == ALPN {
		c.hc = (&http3.Transport{DisableCompression: true}).NewClientConn(c.conn)
	}
	return c, nil
}

// HandshakeComplete is closed when the handshake completes (immediately
// after Dial unless Early was set).
func (c *Conn) HandshakeComplete() <-chan struct{} { return c.conn.HandshakeComplete() }

// Done is closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.conn.Context().Done() }

// State is what a QUIC connection negotiated.
type State struct {
	TLS      tls.ConnectionState
	Used0RTT bool   // the server accepted 0-RTT
	Version  string // QUIC version: "v1", "v2"
}

// State returns what the connection negotiated so far; call it after
// HandshakeComplete for final values.
func (c *Conn) State() State {
	cs := c.conn.ConnectionState()
	return State{TLS: cs.TLS, Used0RTT: cs.Used0RTT, Version: cs.Version.String()}
}

// LocalAddr returns the client's UDP address.
func (c *Conn) LocalAddr() net.Addr { return c.conn.LocalAddr() }

// RoundTrip sends an HTTP/3 request on the connection (ALPN must be HTTP/3).
// A request with method MethodGet0RTT is sent without waiting for the
// handshake.
func (c *Conn) RoundTrip(req *http.Request) (*http.Response, error) {
	if c.hc == nil {
		return nil, errors.New("h3: RoundTrip on a raw QUIC connection")
	}
	return c.hc.RoundTrip(req)
}

// Stream is one bidirectional QUIC stream of a raw connection.
type Stream struct{ s *quic.Stream }

// OpenStream opens a bidirectional stream, waiting for stream credit. On a
// 0-RTT connection the stream may carry 0-RTT data.
func (c *Conn) OpenStream(ctx context.Context) (*Stream, error) {
	s, err := c.conn.OpenStreamSync(ctx)
	if err != nil {
		return nil, err
	}
	return &Stream{s: s}, nil
}

// Read reads response bytes.
func (s *Stream) Read(p []byte) (int, error) { return s.s.Read(p) }

// Write writes request bytes.
func (s *Stream) Write(p []byte) (int, error) { return s.s.Write(p) }

// CloseWrite ends the send side (FIN).
func (s *Stream) CloseWrite() error { return s.s.Close() }

// Abort resets both directions of the stream.
func (s *Stream) Abort() {
	s.s.CancelRead(0)
	s.s.CancelWrite(0)
}

// SetDeadline sets read and write deadlines.
func (s *Stream) SetDeadline(t time.Time) error { return s.s.SetDeadline(t) }

// Stats returns the connection's transport statistics so far.
func (c *Conn) Stats() model.TransportStats { return statsOf(c.conn, c.c) }

// Close closes the connection (CONNECTION_CLOSE with no error) and its
// socket, and waits (a few seconds at most) for its qlog file.
func (c *Conn) Close() error {
	err := c.conn.CloseWithError(0, "")
	if cerr := c.tr.Close(); err == nil {
		err = cerr
	}
	if cerr := c.tr.Conn.Close(); err == nil && !errors.Is(cerr, net.ErrClosed) {
		err = cerr
	}
	waitQlog(&c.written)
	return err
}

// IsNoALPN reports whether err is a QUIC handshake failure because the
// server offered none of the client's application protocols (TLS alert
// no_application_protocol).
func IsNoALPN(err error) bool {
	var te *quic.TransportError
	return errors.As(err, &te) && te.ErrorCode == quic.TransportErrorCode(0x100+120)
}

// IsTimeout reports whether err is a QUIC handshake or idle timeout.
func IsTimeout(err error) bool {
	var ie *quic.IdleTimeoutError
	var he *quic.HandshakeTimeoutError
	return errors.As(err, &ie) || errors.As(err, &he)
}

// Is0RTTRejected reports whether err means the server rejected 0-RTT.
func Is0RTTRejected(err error) bool { return errors.Is(err, quic.Err0RTTRejected) }

// PeerCertificates completes one QUIC handshake with addr using conf and
// returns the certificate chain the server presented (leaf first), then
// closes the connection. It is for tools that need the server's
// certificate before another client connects (Chromium's SPKI pin list).
func PeerCertificates(ctx context.Context, addr string, conf *tls.Config) ([]*x509.Certificate, error) {
	conn, err := quic.DialAddr(ctx, addr, conf, quicConfig(0, 0))
	if err != nil {
		return nil, err
	}
	defer conn.CloseWithError(0, "")
	return conn.ConnectionState().TLS.PeerCertificates, nil
}
