package netns

import (
	"net"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
)

func TestParseUDPRcvbufErrors(t *testing.T) {
	snmp := "Ip: Forwarding DefaultTTL\nIp: 1 64\n" +
		"Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors\n" +
		"Udp: 100 0 7 50 654 0 0 0 0\n" +
		"UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdpLite: 0 0 0 0 9 0\n"
	n, err := parseUDPRcvbufErrors(snmp)
	if err != nil || n != 654 {
		t.Fatalf("parseUDPRcvbufErrors = %d, %v", n, err)
	}
	for _, bad := range []string{
		"Ip: a\nIp: 1\n", // no Udp line
		"Udp: InDatagrams NoPorts\nUdp: 1 2\nUdpLite: RcvbufErrors\nUdpLite: 9\n", // no RcvbufErrors field
		"Udp: InDatagrams RcvbufErrors\nUdp: 1 x\n",                               // not a number
	} {
		if n, err := parseUDPRcvbufErrors(bad); err == nil {
			t.Errorf("%q: %d, want an error", bad, n)
		}
	}
}

// Datagrams that find the receiving socket's buffer full are counted in the
// receiving side's namespace, and only there: what the socket did not
// hold is exactly the server's count.
func TestUDPReceiveBufferErrors(t *testing.T) {
	tb := newTestbed(t, Config{})
	srv := listenUDP(t, tb, Server)
	if err := srv.SetReadBuffer(2048); err != nil { // the kernel's minimum: about two 1000-byte datagrams
		t.Fatal(err)
	}
	cli := listenUDP(t, tb, Client)
	var before [2]uint64
	for _, s := range []Side{Client, Server} {
		n, err := tb.UDPReceiveBufferErrors(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		before[s] = n
	}
	const sent = 100
	to := srv.LocalAddr().(*net.UDPAddr).AddrPort()
	msg := make([]byte, 1000)
	for range sent {
		if _, err := cli.WriteToUDPAddrPort(msg, to); err != nil {
			t.Fatal(err)
		}
	}
	// Every datagram crossed the link (none dropped: no impairment)...
	settled(tb, func(up, _ emu.Counters) bool { return up.PacketsOut >= sent })
	// ... and the kernel has had time to queue or drop each.
	var after [2]uint64
	deadline := time.Now().Add(5 * time.Second)
	held := 0
	buf := make([]byte, 2048)
	for {
		for _, s := range []Side{Client, Server} {
			n, err := tb.UDPReceiveBufferErrors(s)
			if err != nil {
				t.Fatalf("%s: %v", s, err)
			}
			after[s] = n
		}
		if after[Server]-before[Server]+uint64(held) >= sent || time.Now().After(deadline) {
			break
		}
		// Count what the socket holds, which makes room for the rest.
		srv.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		for {
			if _, err := srv.Read(buf); err != nil {
				break
			}
			held++
		}
	}
	dropped := after[Server] - before[Server]
	if dropped == 0 || dropped+uint64(held) != sent {
		t.Errorf("server namespace: %d dropped + %d received, want %d in all, some dropped", dropped, held, sent)
	}
	if d := after[Client] - before[Client]; d != 0 {
		t.Errorf("client namespace counted %d drops of datagrams it did not receive", d)
	}
	t.Logf("%d of %d datagrams dropped for the 2 KiB receive buffer", dropped, sent)
}

// BenchmarkUDPReceiveBufferErrors measures one reading of one side's
// counter (the runner takes four per sample).
func BenchmarkUDPReceiveBufferErrors(b *testing.B) {
	tb := newTestbed(b, Config{})
	for b.Loop() {
		if _, err := tb.UDPReceiveBufferErrors(Client); err != nil {
			b.Fatal(err)
		}
	}
}
