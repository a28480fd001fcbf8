package runner

import (
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

func TestRecordCC(t *testing.T) {
	cell := &model.Cell{CC: "cubic"}
	srv := tcpSeen{side: netns.Server, cc: "cubic", info: &unix.TCPInfo{Snd_mss: 1448, Snd_cwnd: 10, Total_retrans: 3, Rtt: 20000}}
	cli := tcpSeen{side: netns.Client, cc: "cubic", info: &unix.TCPInfo{Snd_mss: 1448}}

	// The client reported its own statistics; the server (a third-party
	// one) did not: its socket's reading becomes its entry.
	s := &model.Sample{Status: model.StatusOK, Transport: []model.TransportStats{{Kind: "tcp", Side: "client", CongestionAlgo: "cubic"}}}
	recordCC(cell, s, []tcpSeen{cli, srv}, nil)
	if s.Status != model.StatusOK || len(s.Transport) != 2 {
		t.Fatalf("sample = %+v", s)
	}
	if got := s.Transport[1]; got.Side != "server" || got.Kind != "tcp" || got.CongestionAlgo != "cubic" || got.Retransmits != 3 || got.CwndBytes != 14480 || got.SmoothedRTTms != 20 {
		t.Errorf("server entry = %+v", got)
	}

	// The server's socket ran bbr: the sample measured another cell.
	srv.cc = "bbr"
	s = &model.Sample{Status: model.StatusOK}
	recordCC(cell, s, []tcpSeen{cli, srv, srv}, nil)
	if s.Status != model.StatusInvalid || s.Error != "congestion control: plan asked cubic, the server's socket ran bbr" {
		t.Errorf("status %s, error %q", s.Status, s.Error)
	}

	// An endpoint's own report counts too; a failed sample keeps its cause.
	s = &model.Sample{Status: model.StatusFailed, Error: "timeout", Transport: []model.TransportStats{{Kind: "tcp", CongestionAlgo: "reno"}}}
	recordCC(cell, s, nil, nil)
	if s.Status != model.StatusFailed || s.Error != "timeout" {
		t.Errorf("failed sample became %s %q", s.Status, s.Error)
	}
	s.Status = model.StatusOK
	recordCC(cell, s, nil, nil)
	if s.Error != "congestion control: plan asked cubic, the client's socket ran reno" {
		t.Errorf("error %q", s.Error)
	}

	// QUIC statistics are not TCP's; a reading that failed is a warning.
	s = &model.Sample{Status: model.StatusOK, Transport: []model.TransportStats{{Kind: "quic", CongestionAlgo: "reno"}}}
	recordCC(cell, s, nil, io.ErrUnexpectedEOF)
	if s.Status != model.StatusOK || len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "could not be read") {
		t.Errorf("status %s, warnings %q", s.Status, s.Warnings)
	}
}

// TestWatchCC runs a TCP transfer across a real testbed asked for cubic
// (which this host may not allow as a namespace default) between a server
// and a client that choose nothing: the watch must see cubic on both
// sockets from the kernel. Then the server switches its accepted socket to
// bbr after the connection is set up, which the testbed cannot prevent:
// the watch sees it and recordCC marks the sample invalid.
func TestWatchCC(t *testing.T) {
	testsupport.RequireRoot(t, "needs root (network namespaces)")
	delay5ms, err := spec.Parse("delay 5ms")
	if err != nil {
		t.Fatal(err)
	}
	tb, err := netns.New(context.Background(), netns.Config{CC: "cubic", Up: delay5ms, Down: delay5ms})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	var ln net.Listener
	if err := tb.Do(netns.Server, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(tb.Addr(netns.Server), 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	transfer := func(switchTo string) ([]tcpSeen, error) {
		t.Helper()
		served := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				served <- err
				return
			}
			defer c.Close()
			if switchTo != "" {
				rc, _ := c.(*net.TCPConn).SyscallConn()
				rc.Control(func(fd uintptr) {
					err = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, switchTo)
				})
				if err != nil {
					served <- err
					return
				}
			}
			_, err = c.Write(make([]byte, 2<<20))
			served <- err
		}()
		w := watchCC(tb)
		var c net.Conn
		if err := tb.Do(netns.Client, func() (err error) {
			c, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		n, err := io.CopyN(io.Discard, c, 2<<20)
		if err != nil || n != 2<<20 {
			t.Fatalf("read %d bytes: %v", n, err)
		}
		if err := <-served; err != nil {
			t.Fatal(err)
		}
		seen, werr := w.finish()
		c.Close()
		return seen, werr
	}
	cell := &model.Cell{CC: "cubic"}
	seen, err := transfer("")
	if err != nil {
		t.Fatal(err)
	}
	var sides [2]int
	for _, x := range seen {
		sides[x.side]++
		if x.cc != "cubic" {
			t.Errorf("%s socket %s -> %s ran %q, want the testbed's cubic (namespace default %s)", x.side, x.local, x.remote, x.cc, tb.DefaultCC())
		}
	}
	if sides != [2]int{1, 1} {
		t.Fatalf("saw %v sockets (client, server), want one each: %+v", sides, seen)
	}
	s := &model.Sample{Status: model.StatusOK}
	recordCC(cell, s, seen, nil)
	if s.Status != model.StatusOK || len(s.Transport) != 2 || s.Transport[1].Side != "server" || s.Transport[1].PacketsSent == 0 {
		t.Errorf("sample %s %q, transport %+v", s.Status, s.Error, s.Transport)
	}

	seen, err = transfer("bbr")
	if err != nil {
		t.Fatal(err)
	}
	s = &model.Sample{Status: model.StatusOK}
	recordCC(cell, s, seen, nil)
	if s.Status != model.StatusInvalid || s.Error != "congestion control: plan asked cubic, the server's socket ran bbr" {
		t.Errorf("switched to bbr: sample %s %q (seen %+v)", s.Status, s.Error, seen)
	}
}

// TestCheckQUICCC: each QUIC connection must run what its stack runs for
// the cell's cc: quic-go NewReno whatever the plan asks, aioquic the
// plan's when it has it.
func TestCheckQUICCC(t *testing.T) {
	for _, c := range []struct {
		server, client, cc, serverRan, clientRan string
		invalid                                  string
	}{
		{"quicbench", "builtin", "cubic", "reno", "reno", ""},
		{"quicbench", "builtin", "reno", "reno", "reno", ""},
		{"aioquic", "builtin", "reno", "reno", "reno", ""},
		{"aioquic", "builtin", "bbr", "cubic", "reno", ""}, // aioquic has no BBR: its default
		{"aioquic", "builtin", "reno", "cubic", "reno", "the server's QUIC (aioquic) ran cubic, where its stack runs reno"},
		{"quicbench", "aioquic", "cubic", "reno", "reno", "the client's QUIC (aioquic) ran reno, where its stack runs cubic"},
		{"quicbench", "builtin", "cubic", "cubic", "reno", "the server's QUIC (quicbench) ran cubic"},
	} {
		cell := &model.Cell{Key: "k", Protocol: model.ProtoH3, Server: c.server, Client: c.client, CC: c.cc}
		s := &model.Sample{Status: model.StatusOK, Transport: []model.TransportStats{
			{Kind: "quic", Side: "server", CongestionAlgo: c.serverRan},
			{Kind: "quic", Side: "client", CongestionAlgo: c.clientRan},
			{Kind: "tcp", Side: "client", CongestionAlgo: "bbr"}, // not this check's
		}}
		checkQUICCC(cell, s)
		switch {
		case c.invalid == "" && s.Status != model.StatusOK:
			t.Errorf("%+v: %s %s", c, s.Status, s.Error)
		case c.invalid != "" && (s.Status != model.StatusInvalid || !strings.Contains(s.Error, c.invalid)):
			t.Errorf("%+v: %s %q, want invalid with %q", c, s.Status, s.Error, c.invalid)
		}
	}
}
