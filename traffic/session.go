// Package traffic runs the flows that share the emulated bottleneck with a
// measured one, as package competing describes them: each flow's sender runs
// in the testbed's server namespace and its receiver in the client namespace
// (sockets opened through netns.Testbed.Do by the calling process), so
// every flow crosses the emulated link in the same direction as a
// download; the receiver counts the bytes it reads in fixed bins, which
// give each flow's goodput over time (competing.FlowResult). The fairness
// test runs its measured flow with the same machinery.
package traffic

import (
	"github.com/quicbench/quicbench/competing"

	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/internal/sockopt"
	"github.com/quicbench/quicbench/netns"
)

// DefaultBin is the width of the bins in which receivers count bytes.
const DefaultBin = 100 * time.Millisecond

// setupTimeout bounds the establishment of every flow's connection.
const setupTimeout = 10 * time.Second

// Testbed is what a session needs of a testbed: to open sockets inside a
// side's namespace, that side's address, and to give the TCP connections
// of one server-side port a congestion control of their own
// (*netns.Testbed has all three: PortCC, because the testbed's routes
// impose its own congestion control on every connection across the link,
// whatever a socket asks for).
type Testbed interface {
	Do(s netns.Side, fn func() error) error
	Addr(s netns.Side) netip.Addr
	PortCC(port uint16, cc string) (remove func(), err error)
}

// Options tune a session.
type Options struct {
	Bin  time.Duration // receiver bins (DefaultBin when 0)
	Seed uint64        // seeds the web flows' draws
}

// flow is one running flow.
type flow struct {
	f     competing.Flow
	label string
	total atomic.Int64
	bins  []int64 // written by the receiver goroutine only
	mu    sync.Mutex
	err   error
	close []func() // closes its sockets (idempotent)
	port  uint16   // TCP flows: the server side's port; 0 for others
	recv  func(ctx context.Context, add func(int))
	send  func(ctx context.Context)
}

// Session is a set of running flows. Start establishes every flow's
// connection, then starts all senders at the same instant.
type Session struct {
	flows  []*flow
	start  time.Time
	bin    time.Duration
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	res    []competing.FlowResult
}

// Start opens the connections of every flow of s (each of a Count expands
// to its own flow) between tb's namespaces, then starts all of them at
// once. An error leaves nothing open.
func Start(ctx context.Context, tb Testbed, flows []competing.Flow, opt Options) (*Session, error) {
	if opt.Bin <= 0 {
		opt.Bin = DefaultBin
	}
	ss := &Session{bin: opt.Bin}
	alike := map[string]int{}
	for _, f := range flows {
		alike[f.Label()] += f.Count
	}
	seen := map[string]int{}
	for _, f := range flows {
		for range max(f.Count, 1) {
			one := f
			one.Count = 1
			label := one.Label()
			seen[label]++
			if alike[label] > 1 {
				label = fmt.Sprintf("%s #%d", label, seen[label])
			}
			ss.flows = append(ss.flows, &flow{f: one, label: label})
		}
	}
	var ca *certs.CA
	for _, fl := range ss.flows {
		if fl.f.Kind == competing.KindQUIC && ca == nil {
			var err error
			if ca, err = certs.NewCA(); err != nil {
				return nil, fmt.Errorf("competing traffic: %w", err)
			}
		}
	}
	sctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	for i, fl := range ss.flows {
		var err error
		switch fl.f.Kind {
		case competing.KindTCP:
			err = fl.setupTCP(sctx, tb)
		case competing.KindQUIC:
			err = fl.setupQUIC(sctx, tb, ca)
		case competing.KindUDP:
			err = fl.setupUDP(tb)
		case competing.KindWeb:
			err = fl.setupWeb(tb, opt.Seed, uint64(i))
		default:
			err = fmt.Errorf("unknown flow kind %q", fl.f.Kind)
		}
		if err != nil {
			ss.closeAll()
			return nil, fmt.Errorf("competing traffic: start flow %d (%s): %w", i+1, fl.label, err)
		}
	}
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	ss.cancel = rcancel
	ss.start = time.Now()
	for _, fl := range ss.flows {
		ss.wg.Add(2)
		go func() {
			defer ss.wg.Done()
			fl.send(rctx)
		}()
		go func() {
			defer ss.wg.Done()
			fl.recv(rctx, func(n int) {
				fl.total.Add(int64(n))
				b := int(time.Since(ss.start) / ss.bin)
				for len(fl.bins) <= b {
					fl.bins = append(fl.bins, 0)
				}
				fl.bins[b] += int64(n)
			})
		}()
	}
	go func() {
		select {
		case <-ctx.Done():
			ss.Stop()
		case <-rctx.Done():
		}
	}()
	return ss, nil
}

// Started is when the flows' senders started.
func (s *Session) Started() time.Time { return s.start }

// Bin is the width of the result's bins.
func (s *Session) Bin() time.Duration { return s.bin }

// Ports returns, for each of the session's flows in order, the server-side
// port of its TCP connections (0 for QUIC and UDP flows): a reader of the
// namespaces' sockets tells the flows' connections from a sample's by it.
func (s *Session) Ports() []uint16 {
	out := make([]uint16, len(s.flows))
	for i, f := range s.flows {
		out[i] = f.port
	}
	return out
}

// Bytes returns the bytes each flow has received so far, in flow order.
func (s *Session) Bytes() []int64 {
	out := make([]int64, len(s.flows))
	for i, f := range s.flows {
		out[i] = f.total.Load()
	}
	return out
}

// Stop stops every flow, closes its sockets and returns what each
// received. It is idempotent.
func (s *Session) Stop() []competing.FlowResult {
	s.once.Do(func() {
		elapsed := time.Since(s.start)
		s.cancel()
		s.closeAll()
		s.wg.Wait()
		n := int((elapsed + s.bin - 1) / s.bin)
		for i, f := range s.flows {
			bins := f.bins
			if len(bins) > n {
				bins = bins[:n] // bytes read while closing
			}
			for len(bins) < n {
				bins = append(bins, 0)
			}
			r := competing.FlowResult{Flow: f.f, Index: i, Label: f.label, Bins: bins, Bytes: f.total.Load()}
			if f.err != nil {
				r.Err = f.err.Error()
			}
			s.res = append(s.res, r)
		}
	})
	return s.res
}

func (s *Session) closeAll() {
	for _, f := range s.flows {
		for _, c := range f.close {
			c()
		}
	}
}

// fail records a flow's first error unless the session is stopping.
func (f *flow) fail(ctx context.Context, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ctx.Err() == nil && f.err == nil && err != nil {
		f.err = err
	}
}

// chunk is what senders write at a time.
var chunk = make([]byte, 64<<10)

func onSide[T any](tb Testbed, s netns.Side, fn func() (T, error)) (T, error) {
	var v T
	err := tb.Do(s, func() error {
		var err error
		v, err = fn()
		return err
	})
	return v, err
}

// setupTCP connects a bulk TCP flow: the server side (the sender) uses the
// flow's congestion control.
func (f *flow) setupTCP(ctx context.Context, tb Testbed) error {
	srv, cli, err := tcpPair(ctx, tb, f.f.CC)
	if err != nil {
		return err
	}
	f.port = portOf(srv.LocalAddr())
	f.close = append(f.close, func() { srv.Close() }, func() { cli.Close() })
	f.send = func(ctx context.Context) {
		for ctx.Err() == nil {
			if _, err := srv.Write(chunk); err != nil {
				f.fail(ctx, fmt.Errorf("send: %w", err))
				return
			}
		}
	}
	f.recv = func(ctx context.Context, add func(int)) { readAll(ctx, f, cli, add) }
	return nil
}

// tcpPair returns the server-side and the client-side end of a new TCP
// connection, cc on both sockets.
func tcpPair(ctx context.Context, tb Testbed, cc string) (net.Conn, net.Conn, error) {
	ln, err := onSide(tb, netns.Server, func() (net.Listener, error) {
		lc := net.ListenConfig{Control: sockopt.CongestionControl(cc)}
		return lc.Listen(ctx, "tcp", netip.AddrPortFrom(tb.Addr(netns.Server), 0).String())
	})
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	if cc != "" {
		// The route's algorithm applies when the connection is set up;
		// the connection keeps it once the rule is gone.
		remove, err := tb.PortCC(portOf(ln.Addr()), cc)
		if err != nil {
			return nil, nil, err
		}
		defer remove()
	}
	type acc struct {
		c   net.Conn
		err error
	}
	ch := make(chan acc, 1)
	go func() {
		c, err := ln.Accept()
		ch <- acc{c, err}
	}()
	cli, err := onSide(tb, netns.Client, func() (net.Conn, error) {
		d := net.Dialer{Control: sockopt.CongestionControl(cc)}
		return d.DialContext(ctx, "tcp", ln.Addr().String())
	})
	if err != nil {
		ln.Close()
		<-ch
		return nil, nil, err
	}
	select {
	case a := <-ch:
		if a.err != nil {
			cli.Close()
			return nil, nil, a.err
		}
		if err := checkCC(cc, a.c, cli); err != nil {
			a.c.Close()
			cli.Close()
			return nil, nil, err
		}
		return a.c, cli, nil
	case <-ctx.Done():
		ln.Close()
		if a := <-ch; a.c != nil {
			a.c.Close()
		}
		cli.Close()
		return nil, nil, ctx.Err()
	}
}

// portOf is the port of a TCP listener's address.
func portOf(a net.Addr) uint16 {
	if t, ok := a.(*net.TCPAddr); ok {
		return uint16(t.Port)
	}
	return 0
}

// checkCC makes sure that both ends of a new TCP connection run cc (""
// asks for nothing): a flow that silently ran another algorithm than its
// spec says would answer another question.
func checkCC(cc string, conns ...net.Conn) error {
	if cc == "" {
		return nil
	}
	for i, c := range conns {
		sc, ok := c.(syscall.Conn)
		if !ok {
			continue
		}
		got, err := sockopt.CongestionOf(sc)
		if err != nil {
			return fmt.Errorf("reading a flow's congestion control: %w", err)
		}
		if got != cc {
			end := [2]string{"server", "client"}[i]
			return fmt.Errorf("the flow asked for congestion control %s, its %s socket runs %s", cc, end, got)
		}
	}
	return nil
}

// readAll reads r until it fails, counting what it reads.
func readAll(ctx context.Context, f *flow, r io.Reader, add func(int)) {
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			add(n)
		}
		if err != nil {
			f.fail(ctx, fmt.Errorf("receive: %w", err))
			return
		}
	}
}

const quicALPN = "quicbench-traffic"

// setupQUIC connects a bulk QUIC flow: one stream the server side writes.
func (f *flow) setupQUIC(ctx context.Context, tb Testbed, ca *certs.CA) error {
	srvIP, cliIP := tb.Addr(netns.Server), tb.Addr(netns.Client)
	cert, err := ca.Issue(srvIP.String())
	if err != nil {
		return err
	}
	qconf := &quic.Config{
		InitialStreamReceiveWindow:     h3.StreamWindow,
		MaxStreamReceiveWindow:         h3.StreamWindow,
		InitialConnectionReceiveWindow: h3.ConnWindow,
		MaxConnectionReceiveWindow:     h3.ConnWindow,
		MaxIdleTimeout:                 30 * time.Second,
	}
	spc, err := onSide(tb, netns.Server, func() (*net.UDPConn, error) {
		return net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(srvIP, 0)))
	})
	if err != nil {
		return err
	}
	str := &quic.Transport{Conn: spc}
	f.close = append(f.close, func() { str.Close() })
	ln, err := str.Listen(&tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{quicALPN}, MinVersion: tls.VersionTLS13}, qconf)
	if err != nil {
		return err
	}
	cpc, err := onSide(tb, netns.Client, func() (*net.UDPConn, error) {
		return net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(cliIP, 0)))
	})
	if err != nil {
		return err
	}
	ctr := &quic.Transport{Conn: cpc}
	f.close = append(f.close, func() { ctr.Close() })
	conn, err := ctr.Dial(ctx, spc.LocalAddr(), &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{quicALPN}, MinVersion: tls.VersionTLS13}, qconf)
	if err != nil {
		return err
	}
	f.close = append(f.close, func() { conn.CloseWithError(0, "") })
	cs, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return err
	}
	// The server sees a stream only once it carries data.
	if _, err := cs.Write([]byte{1}); err != nil {
		return err
	}
	sc, err := ln.Accept(ctx)
	if err != nil {
		return err
	}
	f.close = append(f.close, func() { sc.CloseWithError(0, "") })
	ss, err := sc.AcceptStream(ctx)
	if err != nil {
		return err
	}
	if _, err := io.ReadFull(ss, make([]byte, 1)); err != nil {
		return err
	}
	f.send = func(ctx context.Context) {
		for ctx.Err() == nil {
			if _, err := ss.Write(chunk); err != nil {
				f.fail(ctx, fmt.Errorf("send: %w", err))
				return
			}
		}
	}
	f.recv = func(ctx context.Context, add func(int)) { readAll(ctx, f, cs, add) }
	return nil
}

// udpPayload is the size of a constant-rate UDP flow's datagrams.
const udpPayload = 1200

// udpTick is the pacing period of a constant-rate UDP flow.
const udpTick = time.Millisecond

// setupUDP opens a constant-rate UDP flow.
func (f *flow) setupUDP(tb Testbed) error {
	rc, err := onSide(tb, netns.Client, func() (*net.UDPConn, error) {
		return net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(tb.Addr(netns.Client), 0)))
	})
	if err != nil {
		return err
	}
	f.close = append(f.close, func() { rc.Close() })
	_ = rc.SetReadBuffer(4 << 20)
	to := rc.LocalAddr().(*net.UDPAddr)
	sc, err := onSide(tb, netns.Server, func() (*net.UDPConn, error) {
		return net.DialUDP("udp", nil, to)
	})
	if err != nil {
		return err
	}
	f.close = append(f.close, func() { sc.Close() })
	rate := f.f.Rate
	f.send = func(ctx context.Context) {
		start := time.Now()
		var sent uint64
		t := time.NewTicker(udpTick)
		defer t.Stop()
		buf := make([]byte, udpPayload)
		for {
			due := uint64(time.Since(start).Seconds() * float64(rate) / 8 / udpPayload)
			for ; sent < due; sent++ {
				// A full socket buffer is loss at the sender, as a
				// constant-rate source without feedback would suffer.
				_, _ = sc.Write(buf)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
	f.recv = func(ctx context.Context, add func(int)) { readAll(ctx, f, rc, add) }
	return nil
}

// webCap caps a web object at this many times the mean size.
const webCap = 20

// setupWeb opens an on/off web-like flow: a server-namespace listener that
// sends as many bytes as each connection asks for, and a client loop that
// thinks, then fetches one object over a new connection.
func (f *flow) setupWeb(tb Testbed, seed, stream uint64) error {
	cc := f.f.CC
	ln, err := onSide(tb, netns.Server, func() (net.Listener, error) {
		lc := net.ListenConfig{Control: sockopt.CongestionControl(cc)}
		return lc.Listen(context.Background(), "tcp", netip.AddrPortFrom(tb.Addr(netns.Server), 0).String())
	})
	if err != nil {
		return err
	}
	if cc != "" {
		remove, err := tb.PortCC(portOf(ln.Addr()), cc)
		if err != nil {
			ln.Close()
			return err
		}
		f.close = append(f.close, remove)
	}
	f.port = portOf(ln.Addr())
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	stopped := false
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	untrack := func(c net.Conn) {
		mu.Lock()
		delete(conns, c)
		mu.Unlock()
		c.Close()
	}
	f.close = append(f.close, func() {
		ln.Close()
		mu.Lock()
		stopped = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	addr := ln.Addr().String()
	rng := rand.New(rand.NewPCG(seed, stream))
	mean, off := float64(f.f.Size), f.f.Off
	f.send = func(ctx context.Context) {
		var wg sync.WaitGroup
		defer wg.Wait()
		for {
			c, err := ln.Accept()
			if err != nil {
				f.fail(ctx, fmt.Errorf("accept: %w", err))
				return
			}
			if !track(c) {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer untrack(c)
				var hdr [8]byte
				if _, err := io.ReadFull(c, hdr[:]); err != nil {
					return
				}
				left := int64(binary.BigEndian.Uint64(hdr[:]))
				for left > 0 && ctx.Err() == nil {
					n, err := c.Write(chunk[:min(left, int64(len(chunk)))])
					if err != nil {
						return
					}
					left -= int64(n)
				}
			}()
		}
	}
	f.recv = func(ctx context.Context, add func(int)) {
		buf := make([]byte, 64<<10)
		for {
			think := time.Duration(rng.ExpFloat64() * float64(off))
			// Pareto with shape a = 1.5 and mean m: scale m(a-1)/a.
			const a = 1.5
			size := int64(mean * (a - 1) / a / math.Pow(1-rng.Float64(), 1/a))
			size = max(1, min(size, int64(webCap*mean)))
			select {
			case <-ctx.Done():
				return
			case <-time.After(think):
			}
			c, err := onSide(tb, netns.Client, func() (net.Conn, error) {
				d := net.Dialer{Control: sockopt.CongestionControl(cc), Timeout: setupTimeout}
				return d.DialContext(ctx, "tcp", addr)
			})
			if err != nil {
				f.fail(ctx, fmt.Errorf("connect: %w", err))
				return
			}
			if !track(c) {
				return
			}
			var hdr [8]byte
			binary.BigEndian.PutUint64(hdr[:], uint64(size))
			_, err = c.Write(hdr[:])
			var got int64
			for err == nil && got < size {
				var n int
				n, err = c.Read(buf)
				got += int64(n)
				if n > 0 {
					add(n)
				}
			}
			untrack(c)
			if err != nil && !errors.Is(err, io.EOF) {
				f.fail(ctx, fmt.Errorf("receive: %w", err))
				return
			}
		}
	}
	return nil
}
