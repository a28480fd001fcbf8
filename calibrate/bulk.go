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
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/internal/model"
	"github.com/quicbench/quicbench/netns"
)

// Protocols of the throughput comparison.
const (
	protoTCP  = "tcp"  // kernel TCP, no TLS: a source writing zeros
	protoTLS  = "tls"  // quicbench's raw protocol over TLS 1.3 over TCP
	protoQUIC = "quic" // quicbench's raw protocol over one quic-go stream
)

var bulkProtos = []string{protoTCP, protoTLS, protoQUIC}

// bulkEnd is one environment's servers: a plain TCP source and quicbench's
// endpoint server (raw protocol on TLS/TCP and QUIC), in the server
// namespace.
type bulkEnd struct {
	e     doer
	cc    string
	src   *tcpSource
	srv   *endpoint.Server
	roots *x509.CertPool
}

func startBulkEnd(ctx context.Context, e doer, cc string) (*bulkEnd, error) {
	b := &bulkEnd{e: e, cc: cc}
	var err error
	if b.src, err = startTCPSource(e, cc); err != nil {
		return nil, err
	}
	err = e.Do(netns.Server, func() error {
		var err error
		b.srv, err = endpoint.StartServer(ctx, endpoint.ServerConfig{
			Host:              e.Addr(netns.Server).String(),
			Protocols:         []string{model.ProtoTCP, model.ProtoQUIC},
			CongestionControl: cc,
			NoQUICEvents:      true,
		})
		return err
	})
	if err != nil {
		b.src.Close()
		return nil, fmt.Errorf("endpoint server: %w", err)
	}
	if b.roots, err = certs.PoolFromPEM([]byte(b.srv.Info().CAPEM)); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *bulkEnd) Close() error {
	var errs []error
	if b.srv != nil {
		errs = append(errs, b.srv.Close())
	}
	errs = append(errs, b.src.Close())
	return errors.Join(errs...)
}

// goodput downloads with proto for d and returns the steady-state goodput
// in bit/s (the first fifth of the transfer left out). window, if set, is
// called when the measured window starts and ends.
func (b *bulkEnd) goodput(ctx context.Context, proto string, d time.Duration, paceBytes uint64, window func(start bool)) (float64, error) {
	client := b.e.Addr(netns.Client)
	switch proto {
	case protoTCP:
		var c net.Conn
		err := b.e.Do(netns.Client, func() error {
			var err error
			dl := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(client, 0)), Control: netns.CCControl(b.cc), Timeout: 10 * time.Second}
			c, err = dl.DialContext(ctx, "tcp4", b.src.addr.String())
			return err
		})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		if _, err := c.Write(binary.BigEndian.AppendUint64(nil, paceBytes)); err != nil {
			return 0, err
		}
		return measureRead(c, c.SetReadDeadline, d, window)
	case protoTLS:
		var c net.Conn
		err := b.e.Do(netns.Client, func() error {
			var err error
			dl := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(client, 0)), Control: netns.CCControl(b.cc), Timeout: 10 * time.Second}
			c, err = dl.DialContext(ctx, "tcp4", b.srv.Addr())
			return err
		})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		tc := tls.Client(c, b.tlsConfig([]string{raw.ALPN}))
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
		var qc *h3.Conn
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := b.e.Do(netns.Client, func() error {
			var err error
			qc, err = h3.Dial(hctx, b.srv.Addr(), h3.DialConfig{TLS: b.tlsConfig(nil), ALPN: raw.ALPN, NoEvents: true})
			return err
		})
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
	return 0, fmt.Errorf("unknown protocol %q", proto)
}

func (b *bulkEnd) tlsConfig(alpn []string) *tls.Config {
	return &tls.Config{RootCAs: b.roots, ServerName: b.e.Addr(netns.Server).String(), NextProtos: alpn, MinVersion: tls.VersionTLS13}
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

// tcpSource is a kernel TCP server in the server namespace that writes
// zeros to every client until it goes away, paced at the rate (bytes/s)
// the client sends first as 8 bytes (0: unpaced).
type tcpSource struct {
	ln   net.Listener
	addr netip.AddrPort
	wg   sync.WaitGroup
	mu   sync.Mutex
	cs   map[net.Conn]struct{}
}

func startTCPSource(e doer, cc string) (*tcpSource, error) {
	s := &tcpSource{cs: map[net.Conn]struct{}{}}
	err := e.Do(netns.Server, func() error {
		lc := net.ListenConfig{Control: netns.CCControl(cc)}
		var err error
		s.ln, err = lc.Listen(context.Background(), "tcp4", netip.AddrPortFrom(e.Addr(netns.Server), 0).String())
		return err
	})
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

// bulkEnds are the servers of both paths.
type bulkEnds struct{ veth, emulated *bulkEnd }

func (r *run) startBulkEnds() (*bulkEnds, error) {
	v, err := startBulkEnd(r.ctx, r.veth, r.cfg.CC)
	if err != nil {
		return nil, fmt.Errorf("veth servers: %w", err)
	}
	e, err := startBulkEnd(r.ctx, r.tb, r.cfg.CC)
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("emulated path servers: %w", err)
	}
	return &bulkEnds{veth: v, emulated: e}, nil
}

func (b *bulkEnds) Close() error { return errors.Join(b.veth.Close(), b.emulated.Close()) }

// throughput compares bulk goodput through the emulated link and over the
// veth pair, and measures the emulator's CPU at 100 Mbit/s.
func (r *run) throughput() error {
	ends, err := r.startBulkEnds()
	if err != nil {
		return err
	}
	defer ends.Close()
	if err := r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed); err != nil {
		return err
	}
	for _, p := range bulkProtos {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		g := r.compare(ends, p)
		if g.Error != "" {
			r.warn("throughput %s: %s", p, g.Error)
		}
		r.rep.Goodput = append(r.rep.Goodput, g)
	}
	return r.cpu(ends.emulated)
}

// compare runs one transfer of proto over the veth pair, then one through
// the emulated link.
func (r *run) compare(ends *bulkEnds, p string) Goodput {
	g := Goodput{Proto: p}
	var errs []error
	for _, env := range []string{"veth", "emulated"} {
		end := ends.veth
		if env == "emulated" {
			end = ends.emulated
		}
		r.progress("throughput: %s over the %s path for %v", p, env, r.cfg.Duration)
		var before outside
		if env == "emulated" {
			before = r.outsideSnapshot()
		}
		drops0, derr0 := udpReceiveDrops(end.e, netns.Client)
		bps, err := end.goodput(r.ctx, p, r.cfg.Duration, 0, nil)
		drops1, derr1 := udpReceiveDrops(end.e, netns.Client)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", env, err))
		}
		if env == "emulated" {
			r.checkOutside("throughput "+p, before, dirUp, dirDown)
			g.EmulatedBps = bps
		} else {
			g.VethBps = bps
		}
		if p == protoQUIC && derr0 == nil && derr1 == nil {
			if env == "veth" {
				g.VethReceiveDrops = drops1 - drops0
			} else {
				g.EmulatedReceiveDrops = drops1 - drops0
			}
		}
	}
	if g.VethBps > 0 {
		g.Ratio = g.EmulatedBps / g.VethBps
	}
	if err := errors.Join(errs...); err != nil {
		g.Error = err.Error()
	}
	return g
}

// cpuLoad is the fixed load of the CPU figures, in bit/s.
const cpuLoad = 100e6

// cpu measures the emulator's CPU while it carries 100 Mbit/s of paced TCP
// (TSO super-packets one way, ACKs the other) and of UDP datagrams sent one
// per system call (per-packet work only).
func (r *run) cpu(b *bulkEnd) error {
	if err := r.tb.SetLink(r.links[0], r.links[1], r.cfg.Seed); err != nil {
		return err
	}
	r.progress("emulator CPU: 100 Mbit/s of paced TCP for %v", r.cfg.Duration)
	r.rep.CPU = append(r.rep.CPU, r.cpuTCP(b))
	if err := r.ctx.Err(); err != nil {
		return err
	}
	r.progress("emulator CPU: 100 Mbit/s of UDP datagrams for %v", r.cfg.Duration)
	c, err := r.cpuUDP()
	if err != nil {
		return err
	}
	r.rep.CPU = append(r.rep.CPU, c)
	return nil
}

// cpuTCP is the emulator's CPU over a download paced at 100 Mbit/s.
func (r *run) cpuTCP(b *bulkEnd) CPU {
	var cpu0, cpu1 time.Duration
	var t0, t1 time.Time
	bps, err := b.goodput(r.ctx, protoTCP, r.cfg.Duration, uint64(cpuLoad/8), func(start bool) {
		if start {
			cpu0, t0 = r.tb.ForwarderCPU(), time.Now()
		} else {
			cpu1, t1 = r.tb.ForwarderCPU(), time.Now()
		}
	})
	c := CPU{Load: "TCP paced at 100 Mbit/s, server to client", GoodputBps: bps}
	if err != nil {
		c.Error = err.Error()
	} else if t1.After(t0) {
		c.CorePercent = 100 * float64(cpu1-cpu0) / float64(t1.Sub(t0))
	}
	return c
}

// cpuUDP is the emulator's CPU over 100 Mbit/s of 1500-byte UDP datagrams,
// one per send (no segmentation offload: per-packet work only).
func (r *run) cpuUDP() (CPU, error) {
	ph := r.nextPhase()
	col := newCollector(ph, 0, realtimeOffset())
	stop := collect([]*receiver{r.rx[dirUp]}, []*collector{col})
	fl := newBulkFlow(r.probeTx[dirUp], kindBulk, ph, cpuLoad, r.cfg.Duration, nil)
	cpu0, t0 := r.tb.ForwarderCPU(), time.Now()
	r.runFlows([]*flow{fl})
	cpu1, t1 := r.tb.ForwarderCPU(), time.Now()
	time.Sleep(100 * time.Millisecond)
	if err := stop(); err != nil {
		return CPU{}, err
	}
	c := CPU{Load: "UDP, 1500-byte datagrams one per send, 100 Mbit/s, client to server",
		CorePercent: 100 * float64(cpu1-cpu0) / float64(t1.Sub(t0))}
	if col.bulkLast > col.bulkFirst {
		c.GoodputBps = float64(col.bulkBytes-col.bulkFirstSize) * 8 / (float64(col.bulkLast-col.bulkFirst) / 1e9)
	}
	return c, nil
}

// udpReceiveDrops reads the UDP datagrams side's namespace dropped for want
// of socket buffer space (RcvbufErrors in /proc/net/snmp): a QUIC receiver
// that cannot keep up loses packets there, which its sender takes for
// congestion.
func udpReceiveDrops(e doer, s netns.Side) (uint64, error) {
	var n uint64
	err := e.Do(s, func() error {
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		n, err = parseUDPRcvbufErrors(string(b))
		return err
	})
	return n, err
}

// parseUDPRcvbufErrors finds Udp: RcvbufErrors in /proc/net/snmp's text.
func parseUDPRcvbufErrors(snmp string) (uint64, error) {
	var header []string
	for _, line := range strings.Split(snmp, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if header == nil {
			header = f
			continue
		}
		for i, name := range header {
			if name == "RcvbufErrors" && i < len(f) {
				return strconv.ParseUint(f[i], 10, 64)
			}
		}
	}
	return 0, errors.New("/proc/net/snmp: no Udp RcvbufErrors")
}
