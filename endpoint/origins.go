package endpoint

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/endpoint/replay"
	"github.com/quicbench/quicbench/model"
)

// originServer is one port of one group of a replay: HTTP/1.1 and HTTP/2
// over TLS on TCP, HTTP/3 on UDP, on the group's address, presenting for
// each server name its own leaf.
type originServer struct {
	s     *Server
	group int
	addr  string // host:port
	tcpLn net.Listener
	httpS *http.Server
	ln    *chanListener
	quic  *h3.Server
	tls   *tls.Config
	once  sync.Once
	err   error
}

// startOrigins starts the listeners of cfg.Replay, if any.
func (s *Server) startOrigins() error {
	o := s.cfg.Replay
	if o == nil {
		return nil
	}
	if s.ca == nil {
		return errors.New("endpoint: a replay mints its certificates with the server's CA: it cannot be combined with a given certificate")
	}
	key, ok := s.leaf.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New("endpoint: the server's leaf key is not ECDSA")
	}
	for gi, g := range o.Layout().Groups {
		leaves := map[string]*tls.Certificate{}
		for _, h := range g.Hosts {
			c, err := s.ca.IssueWithKey(key, h)
			if err != nil {
				return fmt.Errorf("endpoint: replay: certificate for %s: %w", h, err)
			}
			leaves[h] = &c
		}
		first := leaves[g.Hosts[0]]
		conf := s.tlsConf.Clone()
		conf.Certificates = nil
		conf.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c, ok := leaves[strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))]; ok {
				return c, nil
			}
			return first, nil // a name the group does not serve: the client refuses it
		}
		for _, port := range g.Ports {
			srv, err := s.startOrigin(gi, net.JoinHostPort(g.Addr, strconv.Itoa(port)), conf)
			if err != nil {
				return fmt.Errorf("endpoint: replay: origin %s (%s): %w", net.JoinHostPort(g.Addr, strconv.Itoa(port)), strings.Join(g.Hosts, ", "), err)
			}
			s.origins = append(s.origins, srv)
		}
		s.info.ReplayAddrs = append(s.info.ReplayAddrs, g.Addr)
	}
	s.info.Replay = o.Names()
	return nil
}

// startOrigin listens on addr (TCP and UDP) for group gi.
func (s *Server) startOrigin(gi int, addr string, conf *tls.Config) (*originServer, error) {
	o := &originServer{s: s, group: gi, addr: addr}
	ln, err := s.listenConfig().Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	o.tcpLn = ln
	ua, err := net.ResolveUDPAddr("udp", addr)
	var udp *net.UDPConn
	if err == nil {
		udp, err = net.ListenUDP("udp", ua)
	}
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	handler := s.cfg.Replay.Handler(gi)
	o.tls = conf.Clone()
	o.tls.NextProtos = []string{"h2", "http/1.1"}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	o.ln = newChanListener(ln.Addr())
	o.httpS = &http.Server{
		Handler:           handler,
		Protocols:         &p,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: 1000, MaxReceiveBufferPerConnection: h3.ConnWindow, MaxReceiveBufferPerStream: h3.StreamWindow},
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          log.New(logfWriter(s.logf), "", 0),
	}
	o.quic, err = h3.Listen(udp, h3.ServerConfig{
		TLS:              conf,
		Handler:          handler,
		QlogDir:          s.cfg.QlogDir,
		NoEvents:         s.cfg.NoQUICEvents,
		HandshakeTimeout: serverHandshakeTimeout,
		OnAccept: func(remote string, live func() model.TransportStats) func(model.TransportStats) {
			ref := s.book.open("quic", remote)
			s.book.watch(ref, func(context.Context) (model.TransportStats, error) { return live(), nil })
			return func(st model.TransportStats) { s.book.put(ref, st) }
		},
		OnConn: func(serverName, alpn string) { s.cfg.Replay.Conn(gi, serverName, alpn) },
		Logf:   s.logf,
	})
	if err != nil {
		_ = ln.Close()
		_ = udp.Close()
		return nil, err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); _ = o.httpS.Serve(o.ln) }()
	go func() { defer s.wg.Done(); o.accept() }()
	return o, nil
}

// accept hands every TLS connection, after its handshake, to the HTTP
// server, and records it with the replay.
func (o *originServer) accept() {
	for {
		c, err := o.tcpLn.Accept()
		if err != nil {
			return
		}
		tc := o.s.track(c)
		if tc == nil {
			continue
		}
		o.s.wg.Add(1)
		go func() {
			defer o.s.wg.Done()
			t := tls.Server(tc, o.tls)
			_ = tc.SetDeadline(time.Now().Add(serverHandshakeTimeout))
			if err := t.Handshake(); err != nil {
				_ = t.Close()
				return
			}
			_ = tc.SetDeadline(time.Time{})
			st := t.ConnectionState()
			o.s.cfg.Replay.Conn(o.group, st.ServerName, st.NegotiatedProtocol)
			o.ln.push(t)
		}()
	}
}

func (o *originServer) close() error {
	o.once.Do(func() {
		errs := []error{ignoreClosed(o.tcpLn.Close())}
		_ = o.ln.Close()
		errs = append(errs, ignoreClosed(o.httpS.Close()), o.quic.Close())
		o.err = errors.Join(errs...)
	})
	return o.err
}

// ReplayServer is what the control channel's replay operations need of a
// server: the replay it serves.
type ReplayServer interface {
	ReplayOrigins() *replay.Origins
}

// ReplayOrigins returns the replay the server serves (nil for none).
func (s *Server) ReplayOrigins() *replay.Origins { return s.cfg.Replay }
