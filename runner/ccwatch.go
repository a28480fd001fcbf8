package runner

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/sockdiag"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
)

// ccPollInterval is how often, while a sample runs, the runner reads the
// TCP sockets of both namespaces. A connection that lives less long may
// be missed; it carries little data. A reading of both namespaces took
// about 30 µs (each has a TCP hash table of its own: netns.NewNamespace),
// 0.15% of a core at this interval; with the host's shared table (kernels
// before 6.1) 0.75 ms, 4%.
const ccPollInterval = 20 * time.Millisecond

// tcpSeen is one socket of a TCP connection between the testbed's client
// and server addresses, as the kernel's socket diagnostics last reported
// it during a sample.
type tcpSeen struct {
	side          netns.Side // the namespace holding the socket
	local, remote netip.AddrPort
	cc            string        // the socket's congestion control (INET_DIAG_CONG)
	info          *unix.TCPInfo // its tcp_info at the last reading
}

// serverPort is the server side's port of the socket's connection.
func (x tcpSeen) serverPort() uint16 {
	if x.side == netns.Server {
		return x.local.Port()
	}
	return x.remote.Port()
}

// ccWatch reads, from the kernel, the congestion control of every TCP
// socket that connects the client and the server namespace while a sample
// runs, quicbench's own or not (a browser, a third-party server).
type ccWatch struct {
	tb         *netns.Testbed
	addr       [2]netip.Addr     // the client's and the server's address
	conns      [2]*sockdiag.Conn // sock_diag sockets in each namespace; nil if it failed to open
	stop, done chan struct{}
	seen       map[[2]netip.AddrPort]*tcpSeen // by local and remote address
	order      [][2]netip.AddrPort            // in the order first seen
	err        error                          // the first reading that failed
}

// watchCC starts reading tb's TCP sockets every ccPollInterval, at once
// first; finish stops it.
func watchCC(tb *netns.Testbed) *ccWatch {
	w := &ccWatch{tb: tb, stop: make(chan struct{}), done: make(chan struct{}), seen: map[[2]netip.AddrPort]*tcpSeen{}}
	w.addr = [2]netip.Addr{tb.Addr(netns.Client), tb.Addr(netns.Server)}
	for _, side := range []netns.Side{netns.Client, netns.Server} {
		err := tb.Do(side, func() (err error) {
			w.conns[side], err = sockdiag.Open()
			return err
		})
		if err != nil && w.err == nil {
			w.err = fmt.Errorf("%s namespace: %w", side, err)
		}
	}
	go func() {
		defer close(w.done)
		t := time.NewTicker(ccPollInterval)
		defer t.Stop()
		for {
			w.poll()
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// finish stops the readings, takes a last one (a connection's sockets
// outlive the client's measurement by at least the link's one-way delay),
// and returns every socket seen and the first error.
func (w *ccWatch) finish() ([]tcpSeen, error) {
	close(w.stop)
	<-w.done
	w.poll()
	for _, c := range w.conns {
		if c != nil {
			c.Close()
		}
	}
	out := make([]tcpSeen, 0, len(w.order))
	for _, k := range w.order {
		out = append(out, *w.seen[k])
	}
	return out, w.err
}

// poll reads both namespaces' TCP sockets once (never concurrently with
// itself: the goroutine's last poll returns before finish polls).
func (w *ccWatch) poll() {
	addr := w.addr
	for _, side := range []netns.Side{netns.Client, netns.Server} {
		if w.conns[side] == nil {
			continue
		}
		// The testbed's addresses are IPv4 (and its namespaces have IPv6 off).
		socks, err := w.conns[side].Dump(sockdiag.IPv4, sockdiag.Connected)
		if err != nil {
			if w.err == nil {
				w.err = fmt.Errorf("%s namespace: %w", side, err)
			}
			continue
		}
		for _, s := range socks {
			if s.Local.Addr() != addr[side] || s.Remote.Addr() != addr[1-side] || s.CC == "" {
				continue
			}
			k := [2]netip.AddrPort{s.Local, s.Remote}
			if _, ok := w.seen[k]; !ok {
				w.order = append(w.order, k)
			}
			w.seen[k] = &tcpSeen{side: side, local: s.Local, remote: s.Remote, cc: s.CC, info: s.Info}
		}
	}
}

// recordCC completes sample s of cell c with what the kernel reported of
// its TCP connections (seen, and err if a reading failed): a side whose
// endpoint reported no TCP transport statistics (a browser, a third-party
// server) gets one entry per socket seen, from its last tcp_info reading;
// then every TCP connection's congestion control, reported by an endpoint
// or seen, is checked against the cell's. A sample that ran another one
// than the plan asked is invalid: it measured another cell.
func recordCC(c *model.Cell, s *model.Sample, seen []tcpSeen, err error) {
	if err != nil {
		s.Warnings = append(s.Warnings, "the congestion control of the sample's TCP connections could not be read from the kernel: "+err.Error())
	}
	var reported [2]bool
	for _, t := range s.Transport {
		if t.Kind == "tcp" {
			reported[sideOf(t.Side)] = true
		}
	}
	for _, x := range seen {
		if reported[x.side] || x.info == nil {
			continue
		}
		t := endpoint.TCPInfoStats(x.info, x.cc)
		t.Side = x.side.String()
		s.Transport = append(s.Transport, t)
	}
	if c.CC == "" {
		return
	}
	var diffs []string
	add := func(d string) {
		if !slices.Contains(diffs, d) {
			diffs = append(diffs, d)
		}
	}
	for _, x := range seen {
		if x.cc != c.CC {
			add(fmt.Sprintf("the %s's socket ran %s", x.side, x.cc))
		}
	}
	for _, t := range s.Transport {
		if t.Kind == "tcp" && t.CongestionAlgo != "" && t.CongestionAlgo != c.CC {
			add(fmt.Sprintf("the %s's socket ran %s", sideOf(t.Side), t.CongestionAlgo))
		}
	}
	if len(diffs) == 0 || s.Status != model.StatusOK {
		return
	}
	s.Status = model.StatusInvalid
	s.Error = fmt.Sprintf("congestion control: plan asked %s, %s", c.CC, strings.Join(diffs, ", "))
}

// sideOf maps TransportStats.Side to the namespace ("" is the client).
func sideOf(side string) netns.Side {
	if side == "server" {
		return netns.Server
	}
	return netns.Client
}

// checkQUICCC checks the congestion control every QUIC connection of
// sample s of cell c reported (its TransportStats.CongestionAlgo, by side)
// against what the side's stack runs for the cell's cc: the plan's when
// the stack can run it, else the stack's own (peers.CC.QUICFor; quic-go
// runs NewReno whatever the plan asks). A connection that ran another one
// than its stack says makes the sample invalid: the comparison would mix
// congestion controllers without saying so.
func checkQUICCC(c *model.Cell, s *model.Sample) {
	cc := cmp.Or(c.CC, model.DefaultCC)
	var diffs []string
	for _, t := range s.Transport {
		if t.Kind != "quic" || t.CongestionAlgo == "" {
			continue
		}
		var st *peers.Stack
		var ccs peers.CC
		if t.Side == "server" {
			x, ok := peers.ServerStack(c.ServerImpl())
			if !ok {
				continue
			}
			st, ccs = x, x.Server.CC
		} else {
			x, ok := peers.ClientStack(c.Client)
			if !ok {
				continue
			}
			st, ccs = x, x.Client.CC
		}
		want, _ := ccs.QUICFor(cc)
		if t.CongestionAlgo != want {
			d := fmt.Sprintf("the %s's QUIC (%s) ran %s, where its stack runs %s", sideOf(t.Side), st.Name, t.CongestionAlgo, want)
			if !slices.Contains(diffs, d) {
				diffs = append(diffs, d)
			}
		}
	}
	if len(diffs) == 0 || s.Status != model.StatusOK {
		return
	}
	s.Status = model.StatusInvalid
	s.Error = fmt.Sprintf("congestion control: plan asked %s, %s", cc, strings.Join(diffs, ", "))
}
