package forward

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/tun/offload"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// dfPacket is packet(i, size) with Don't Fragment set and proto as its
// protocol.
func dfPacket(i, size int, proto byte) []byte {
	b := packet(i, size)
	b[6] = 0x40
	b[9] = proto
	binary.BigEndian.PutUint16(b[10:], 0)
	binary.BigEndian.PutUint16(b[10:], checksum(b[:20]))
	return b
}

// checkFragNeeded parses msg as an IPv4 ICMP fragmentation needed from src
// about orig, with next-hop MTU mtu, and checks every field and checksum.
func checkFragNeeded(t *testing.T, msg, orig []byte, src netip.Addr, mtu int) {
	t.Helper()
	h, err := ipv4.ParseHeader(msg)
	if err != nil {
		t.Fatalf("IP header: %v", err)
	}
	if h.Version != 4 || h.Len != 20 || h.TotalLen != len(msg) || h.Protocol != 1 || h.TTL == 0 {
		t.Fatalf("IP header %+v (length %d)", h, len(msg))
	}
	if checksum(msg[:20]) != 0 {
		t.Fatal("bad IP header checksum")
	}
	if got := netip.AddrFrom4([4]byte(h.Src.To4())); got != src {
		t.Fatalf("source %v, want %v", got, src)
	}
	if !bytes.Equal(h.Dst.To4(), orig[12:16]) {
		t.Fatalf("destination %v, want the packet's source %v", h.Dst, orig[12:16])
	}
	if checksum(msg[20:]) != 0 {
		t.Fatal("bad ICMP checksum")
	}
	m, err := icmp.ParseMessage(1, msg[20:])
	if err != nil {
		t.Fatalf("ICMP: %v", err)
	}
	if m.Type != ipv4.ICMPTypeDestinationUnreachable || m.Code != 4 {
		t.Fatalf("ICMP type %v code %d, want destination unreachable, code 4", m.Type, m.Code)
	}
	if got := int(binary.BigEndian.Uint16(msg[26:])); got != mtu {
		t.Fatalf("next-hop MTU %d, want %d", got, mtu)
	}
	quoted := m.Body.(*icmp.DstUnreach).Data
	want := orig[:min(len(orig), icmpMaxLen-28)]
	if len(orig) >= 28 && len(quoted) < 28 || !bytes.Equal(quoted, want) {
		t.Fatalf("quotes %d bytes, want the packet's first %d", len(quoted), len(want))
	}
	if len(msg) > icmpMaxLen {
		t.Fatalf("message of %d bytes, more than %d", len(msg), icmpMaxLen)
	}
}

func TestFragNeededMessage(t *testing.T) {
	router := netip.MustParseAddr("10.1.1.1")
	dst := make([]byte, icmpMaxLen)
	for _, size := range []int{32, 100, 548, 1400} {
		orig := dfPacket(7, size, unix.IPPROTO_TCP)
		n := fragNeeded(dst, orig, 1280, router)
		if n == 0 {
			t.Fatalf("size %d: no message", size)
		}
		checkFragNeeded(t, dst[:n], orig, router, 1280)
	}
	// Without a router address, the message comes from the packet's
	// destination.
	orig := dfPacket(7, 1400, unix.IPPROTO_UDP)
	n := fragNeeded(dst, orig, 576, netip.Addr{})
	checkFragNeeded(t, dst[:n], orig, netip.AddrFrom4([4]byte(orig[16:20])), 576)
	// An echo request is answered; an ICMP error is not.
	echo := dfPacket(7, 1400, 1)
	echo[20] = 8
	if fragNeeded(dst, echo, 1280, router) == 0 {
		t.Error("no answer to an echo request")
	}
}

func TestFragNeededNotSent(t *testing.T) {
	router := netip.MustParseAddr("10.1.1.1")
	mod := func(f func(b []byte)) []byte {
		b := dfPacket(1, 1400, unix.IPPROTO_TCP)
		f(b)
		return b
	}
	for name, orig := range map[string][]byte{
		"no DF":           mod(func(b []byte) { b[6] = 0 }),
		"later fragment":  mod(func(b []byte) { b[6], b[7] = 0x40, 0x10 }),
		"ICMP error":      mod(func(b []byte) { b[9], b[20] = 1, 3 }),
		"IPv6":            mod(func(b []byte) { b[0] = 0x60 }),
		"short":           dfPacket(1, 1400, unix.IPPROTO_TCP)[:19],
		"bad IHL":         mod(func(b []byte) { b[0] = 0x44 }),
		"length too long": mod(func(b []byte) { binary.BigEndian.PutUint16(b[2:], 1401) }),
		"broadcast src":   mod(func(b []byte) { copy(b[12:], []byte{255, 255, 255, 255}) }),
		"multicast src":   mod(func(b []byte) { copy(b[12:], []byte{224, 0, 0, 1}) }),
		"unspecified src": mod(func(b []byte) { copy(b[12:], []byte{0, 0, 0, 0}) }),
	} {
		if n := fragNeeded(make([]byte, icmpMaxLen), orig, 1280, router); n != 0 {
			t.Errorf("%s: answered with %d bytes", name, n)
		}
	}
	if n := fragNeeded(make([]byte, icmpMaxLen), dfPacket(1, 1400, 6), 1280, netip.MustParseAddr("::1")); n != 0 {
		t.Error("answered from an IPv6 router address")
	}
}

// TestForwarderAnswersTooBig sends packets above the MTU through a running
// forwarder: in icmp mode each DF one is answered into the device it came
// from and none reaches the far side; in blackhole mode none is answered.
func TestForwarderAnswersTooBig(t *testing.T) {
	for _, tt := range []struct {
		link string
		vnet bool
	}{{"mtu 1000", false}, {"mtu 1000 icmp delay 1ms", true}, {"mtu 1000 blackhole", false}} {
		r := startRig(t, tt.link, tt.vnet)
		h := 0
		if tt.vnet {
			h = offload.VirtioNetHdrLen
		}
		send := func(b []byte) {
			if err := write(r.in.peer, append(make([]byte, h), b...)); err != nil {
				t.Fatal(err)
			}
		}
		big, noDF, small := dfPacket(1, 1200, unix.IPPROTO_TCP), packet(2, 1200), dfPacket(3, 1000, unix.IPPROTO_TCP)
		send(big)
		send(noDF)
		send(small)
		buf := make([]byte, 4096)
		k, err := read(r.out.peer, buf)
		if err != nil || !bytes.Equal(buf[h:k], small) {
			t.Fatalf("%s: the packet at the MTU did not cross: %v", tt.link, err)
		}
		blackhole := bytes.Contains([]byte(tt.link), []byte("blackhole"))
		unix.SetsockoptTimeval(r.in.peer, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200_000})
		k, err = read(r.in.peer, buf)
		switch {
		case blackhole && err == nil:
			t.Errorf("%s: %d bytes came back", tt.link, k)
		case !blackhole && err != nil:
			t.Fatalf("%s: no ICMP message came back: %v", tt.link, err)
		case !blackhole:
			if !bytes.Equal(buf[:h], make([]byte, h)) {
				t.Fatalf("%s: virtio_net_hdr not zero: %x", tt.link, buf[:h])
			}
			checkFragNeeded(t, buf[h:k], big, netip.MustParseAddr("10.1.1.1"), 1000)
			if k, err := read(r.in.peer, buf); err == nil {
				t.Errorf("%s: a second message (%d bytes) came back, for the packet without DF", tt.link, k)
			}
		}
		c := r.settled(0, func(c emu.Counters) bool { return c.PacketsIn >= 3 && c.PacketsOut >= 1 })
		if c.DropMTU != 2 || c.PacketsOut != 1 {
			t.Errorf("%s: counters %+v", tt.link, c)
		}
		deadline := time.Now().Add(2 * time.Second)
		s := r.fwd.Stats(0)
		for !blackhole && s.FragNeeded+s.TooBigSilent < 2 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			s = r.fwd.Stats(0)
		}
		want := [2]uint64{1, 1}
		if blackhole {
			want = [2]uint64{}
		}
		if got := [2]uint64{s.FragNeeded, s.TooBigSilent}; got != want || s.WriteErrors != 0 {
			t.Errorf("%s: stats %+v, want FragNeeded, TooBigSilent = %v", tt.link, s, want)
		}
	}
}
