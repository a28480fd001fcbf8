package netns

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
)

// Extra server addresses answer the client across the emulated link: the
// delay shows in the round trip and the emulator counts the datagrams.
func TestAddAddrsAcrossLink(t *testing.T) {
	tb := newTestbed(t, Config{Up: mustLink(t, "delay 20ms"), Down: mustLink(t, "delay 20ms")})
	base := tb.Addr(Server).As4()
	var extra []netip.Addr
	for _, h := range []byte{10, 11, 200} {
		b := base
		b[3] = h
		extra = append(extra, netip.AddrFrom4(b))
	}
	if err := tb.AddAddrs(Server, extra...); err != nil {
		t.Fatal(err)
	}
	if err := tb.AddAddrs(Server, extra[0]); err != nil {
		t.Fatalf("adding an address twice: %v", err)
	}
	cli := listenUDP(t, tb, Client)
	for _, a := range extra {
		var srv *net.UDPConn
		err := tb.Do(Server, func() (err error) {
			srv, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 7777)))
			return err
		})
		if err != nil {
			t.Fatalf("listen on %s: %v", a, err)
		}
		go func() {
			buf := make([]byte, 2048)
			n, from, err := srv.ReadFromUDPAddrPort(buf)
			if err == nil {
				srv.WriteToUDPAddrPort(buf[:n], from)
			}
		}()
		up0, down0 := tb.Counters()
		rtt, err := roundTrip(cli, netip.AddrPortFrom(a, 7777), 3*time.Second)
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v", a, err)
		}
		if rtt < 40*time.Millisecond {
			t.Errorf("%s: round trip %v, less than the link's 40 ms: not across the emulator", a, rtt)
		}
		up, down := settled(tb, func(up, down emu.Counters) bool {
			return up.PacketsOut > up0.PacketsOut && down.PacketsOut > down0.PacketsOut
		})
		if up.PacketsOut <= up0.PacketsOut || down.PacketsOut <= down0.PacketsOut {
			t.Errorf("%s: the emulator delivered nothing (up %d->%d, down %d->%d)", a, up0.PacketsOut, up.PacketsOut, down0.PacketsOut, down.PacketsOut)
		}
	}
	for _, bad := range []string{"10.250.9.9", tb.RouterAddr(Server).String(), tb.Addr(Client).String()} {
		if err := tb.AddAddrs(Server, netip.MustParseAddr(bad)); err == nil {
			t.Errorf("address %s accepted on the server side", bad)
		}
	}
}
