package calibrate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/internal/control"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

// BulkCommand is the hidden quicbench subcommand that runs a bulk endpoint
// of the throughput phase in a namespace: `quicbench calibrate-bulk server`
// or `quicbench calibrate-bulk client`, started by Run (Config.Exe) and
// driven over its standard input and output (BulkMain). The executable
// given as Config.Exe must dispatch it to BulkMain.
const BulkCommand = "calibrate-bulk"

// Roles of BulkCommand.
const (
	bulkRoleServer = "server"
	bulkRoleClient = "client"
)

// bulkRoles are the roles of package control that BulkCommand's roles
// serve.
var bulkRoles = map[string]control.Role{
	bulkRoleServer: control.RoleBulkServer,
	bulkRoleClient: control.RoleBulkClient,
	bulkRoleSoak:   control.RoleSoaker,
}

// bulkServerConfig is a server child's configuration, the body of its
// first request (control.Listen).
type bulkServerConfig struct {
	Host netip.Addr `json:"host"` // the address to listen on
	CC   string     `json:"cc"`   // TCP congestion control
}

// bulkServerReady is a server child's answer once it listens.
type bulkServerReady struct {
	TCP   string `json:"tcp"`    // the TCP source, host:port
	Raw   string `json:"raw"`    // the endpoint server (raw protocol, TLS/TCP and QUIC), host:port
	CAPEM string `json:"ca_pem"` // the endpoint server's CA certificate
}

// bulkClientConfig is a client child's configuration: one transfer, the
// body of its only request (control.Transfer).
type bulkClientConfig struct {
	Proto      string        `json:"proto"`       // protoTCP, protoTLS or protoQUIC
	Local      netip.Addr    `json:"local"`       // the address to send from
	Addr       string        `json:"addr"`        // the server, host:port
	ServerName string        `json:"server_name"` // TLS server name
	CAPEM      string        `json:"ca_pem,omitempty"`
	CC         string        `json:"cc"`
	Duration   time.Duration `json:"duration_ns"`
	PaceBytes  uint64        `json:"pace_bytes,omitempty"` // TCP source's pacing rate, bytes/s
}

// bulkResult is a client child's answer: the goodput, in bit/s.
type bulkResult struct {
	Bps float64 `json:"bps"`
}

// The notes a client child sends as the measured window starts and ends.
const (
	bulkNoteStart = "start"
	bulkNoteEnd   = "end"
)

// BulkMain runs BulkCommand's role ("server", "client" or "soak") in the
// calling process, which a namespace-entering command started in the
// right namespace, serving the role's operations of package control on
// stdin and stdout.
//
// The server's first request (control.Listen) carries its configuration:
// it starts a kernel TCP source and quicbench's endpoint server, answers
// with their addresses and CA certificate, and serves until stdin ends (or
// ctx is done). The client's one request (control.Transfer) carries its
// transfer: it downloads for the configured duration, sends notes when
// the measured window (the last four fifths of the transfer) starts and
// ends, answers with the goodput or the transfer's error, and exits. An
// error return means the child could not do its job at all (no or a bad
// configuration).
func BulkMain(ctx context.Context, role string, stdin io.Reader, stdout io.Writer) error {
	var s *control.Server
	switch role {
	case bulkRoleServer:
		var ends bulkServers
		defer ends.Close()
		s = ends.server()
	case bulkRoleClient:
		s = bulkClient()
	case bulkRoleSoak:
		return soakMain(ctx, stdin, stdout)
	default:
		return fmt.Errorf("%s: unknown role %q (want %s, %s or %s)", BulkCommand, role, bulkRoleServer, bulkRoleClient, bulkRoleSoak)
	}
	err := s.Serve(ctx, stdin, stdout)
	switch {
	case errors.Is(err, control.ErrNoRequest):
		return fmt.Errorf("%s %s: reading the configuration: %w", BulkCommand, role, err)
	case errors.Is(err, control.ErrMalformed):
		return fmt.Errorf("%s %s: bad configuration: %w", BulkCommand, role, err)
	case err != nil && ctx.Err() == nil:
		return fmt.Errorf("%s %s: %w", BulkCommand, role, err)
	}
	return nil
}

// bulkServers are a server child's servers, once it listens.
type bulkServers struct {
	src *tcpSource
	srv *endpoint.Server
}

// server is the bulk server role: its first request starts the servers.
func (b *bulkServers) server() *control.Server {
	s := control.NewServer(control.RoleBulkServer)
	control.Handle(s, control.Listen, b.listen)
	s.First(control.Listen)
	return s
}

// listen starts the servers.
func (b *bulkServers) listen(ctx context.Context, cfg bulkServerConfig) (bulkServerReady, error) {
	if b.src != nil {
		return bulkServerReady{}, errors.New("listening already")
	}
	src, err := startTCPSource(cfg.Host, cfg.CC)
	if err != nil {
		return bulkServerReady{}, err
	}
	srv, err := endpoint.StartServer(ctx, endpoint.ServerConfig{
		Host:              cfg.Host.String(),
		Protocols:         []string{model.ProtoTCP, model.ProtoQUIC},
		CongestionControl: cfg.CC,
		NoQUICEvents:      true,
	})
	if err != nil {
		src.Close()
		return bulkServerReady{}, fmt.Errorf("endpoint server: %w", err)
	}
	b.src, b.srv = src, srv
	return bulkServerReady{TCP: src.addr.String(), Raw: srv.Addr(), CAPEM: srv.Info().CAPEM}, nil
}

// Close closes the servers, if they were started.
func (b *bulkServers) Close() {
	if b.src != nil {
		b.srv.Close()
		b.src.Close()
	}
}

// bulkClient is the bulk client role: one transfer, then the end.
func bulkClient() *control.Server {
	s := control.NewServer(control.RoleBulkClient)
	control.Handle(s, control.Transfer, func(ctx context.Context, cfg bulkClientConfig) (bulkResult, error) {
		bps, err := clientGoodput(ctx, cfg, func(start bool) {
			note := bulkNoteEnd
			if start {
				note = bulkNoteStart
			}
			// Should the note not get through, neither will the answer.
			_ = control.Notify(ctx, note, nil)
		})
		return bulkResult{Bps: bps}, err
	})
	s.First(control.Transfer)
	s.Final(control.Transfer)
	return s
}

// clientGoodput downloads with cfg.Proto for cfg.Duration from the calling
// process's namespace and returns the goodput over the last four fifths, in
// bit/s; window is called when the measured window starts and ends.
func clientGoodput(ctx context.Context, cfg bulkClientConfig, window func(start bool)) (float64, error) {
	d := cfg.Duration
	if d <= 0 {
		return 0, fmt.Errorf("duration %v", d)
	}
	dl := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(cfg.Local, 0)), Control: netns.CCControl(cfg.CC), Timeout: 10 * time.Second}
	switch cfg.Proto {
	case protoTCP:
		c, err := dl.DialContext(ctx, "tcp4", cfg.Addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		if _, err := c.Write(binary.BigEndian.AppendUint64(nil, cfg.PaceBytes)); err != nil {
			return 0, err
		}
		return measureRead(c, c.SetReadDeadline, d, window)
	case protoTLS:
		tcfg, err := cfg.tlsConfig([]string{raw.ALPN})
		if err != nil {
			return 0, err
		}
		c, err := dl.DialContext(ctx, "tcp4", cfg.Addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		tc := tls.Client(c, tcfg)
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			return 0, err
		}
		if err := rawRequest(tc, nil); err != nil {
			return 0, err
		}
		return measureRead(tc, tc.SetReadDeadline, d, window)
	case protoQUIC:
		tcfg, err := cfg.tlsConfig(nil)
		if err != nil {
			return 0, err
		}
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		qc, err := h3.Dial(hctx, cfg.Addr, h3.DialConfig{TLS: tcfg, ALPN: raw.ALPN, NoEvents: true})
		if err != nil {
			return 0, err
		}
		defer qc.Close()
		st, err := qc.OpenStream(hctx)
		if err != nil {
			return 0, err
		}
		defer st.Abort()
		if err := rawRequest(st, st.CloseWrite); err != nil {
			return 0, err
		}
		return measureRead(st, st.SetDeadline, d, window)
	}
	return 0, fmt.Errorf("unknown protocol %q", cfg.Proto)
}

func (cfg bulkClientConfig) tlsConfig(alpn []string) (*tls.Config, error) {
	var roots *x509.CertPool
	if cfg.CAPEM != "" {
		var err error
		if roots, err = certs.PoolFromPEM([]byte(cfg.CAPEM)); err != nil {
			return nil, err
		}
	}
	return &tls.Config{RootCAs: roots, ServerName: cfg.ServerName, NextProtos: alpn, MinVersion: tls.VersionTLS13}, nil
}

// rawRequest asks the raw protocol server for an endless body (1 TiB) and
// reads the response header.
func rawRequest(rw io.ReadWriter, closeWrite func() error) error {
	if _, err := rw.Write(raw.AppendRequest(nil, raw.Request{Size: raw.MaxSize})); err != nil {
		return err
	}
	if closeWrite != nil {
		if err := closeWrite(); err != nil {
			return err
		}
	}
	var hdr [raw.ResponseHeaderSize]byte
	if _, err := io.ReadFull(rw, hdr[:]); err != nil {
		return fmt.Errorf("raw response header: %w", err)
	}
	resp, err := raw.ParseResponse(hdr[:])
	if err != nil {
		return err
	}
	if resp.Status != raw.StatusOK {
		return fmt.Errorf("raw response status %d", resp.Status)
	}
	return nil
}

// measureRead reads r for d from its first byte and returns the goodput
// over the last four fifths, in bit/s.
func measureRead(r io.Reader, setDeadline func(time.Time) error, d time.Duration, window func(start bool)) (float64, error) {
	buf := make([]byte, 1<<20)
	_ = setDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAtLeast(r, buf, 1); err != nil {
		return 0, fmt.Errorf("first byte: %w", err)
	}
	t0 := time.Now()
	skipAt, end := t0.Add(d/5), t0.Add(d)
	_ = setDeadline(end)
	var total, base int64
	var start, last time.Time
	for {
		n, err := r.Read(buf)
		now := time.Now()
		if start.IsZero() && !now.Before(skipAt) {
			start, base = now, total
			if window != nil {
				window(true)
			}
		}
		total += int64(n)
		if n > 0 {
			last = now
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
				break
			}
			return 0, err
		}
	}
	if window != nil && !start.IsZero() {
		window(false)
	}
	if start.IsZero() || !last.After(start) {
		return 0, errors.New("no data in the measured window")
	}
	return float64(total-base) * 8 / last.Sub(start).Seconds(), nil
}

// tcpSource is a kernel TCP server that writes zeros to every client until
// it goes away, paced at the rate (bytes/s) the client sends first as 8
// bytes (0: unpaced).
type tcpSource struct {
	ln   net.Listener
	addr netip.AddrPort
	wg   sync.WaitGroup
	mu   sync.Mutex
	cs   map[net.Conn]struct{}
}

// startTCPSource listens on host (in the calling process's namespace).
func startTCPSource(host netip.Addr, cc string) (*tcpSource, error) {
	s := &tcpSource{cs: map[net.Conn]struct{}{}}
	lc := net.ListenConfig{Control: netns.CCControl(cc)}
	var err error
	s.ln, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(host, 0).String())
	if err != nil {
		return nil, fmt.Errorf("tcp source: %w", err)
	}
	s.addr = s.ln.Addr().(*net.TCPAddr).AddrPort()
	s.wg.Go(func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.cs[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Go(func() {
				s.serve(c)
				s.mu.Lock()
				delete(s.cs, c)
				s.mu.Unlock()
			})
		}
	})
	return s, nil
}

func (s *tcpSource) serve(c net.Conn) {
	defer c.Close()
	var hdr [8]byte
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	if pace := binary.BigEndian.Uint64(hdr[:]); pace > 0 {
		if rc, err := c.(*net.TCPConn).SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				_ = unix.SetsockoptUint64(int(fd), unix.SOL_SOCKET, unix.SO_MAX_PACING_RATE, pace)
			})
		}
	}
	buf := make([]byte, 1<<20)
	for {
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

func (s *tcpSource) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.cs {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}
