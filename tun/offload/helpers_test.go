package offload

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
)

// This file builds and checks packets independently of the package's own
// checksum code: refSum is the textbook RFC 1071 loop over big-endian words.

func refSum(b []byte) uint32 {
	var s uint32
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func refFold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

// refPseudo is the pseudo-header sum for an IPv4 or IPv6 packet p.
func refPseudo(p []byte, proto uint8, l4len int) uint32 {
	var s uint32
	if p[0]>>4 == 6 {
		s = refSum(p[8:40])
	} else {
		s = refSum(p[12:20])
	}
	return s + uint32(proto) + uint32(l4len)
}

type flow struct {
	src, dst     netip.Addr
	sport, dport uint16
}

var (
	flowA4 = flow{netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.2.0.1"), 40000, 443}
	flowB4 = flow{netip.MustParseAddr("10.1.0.2"), netip.MustParseAddr("10.2.0.1"), 40001, 443}
	flowA6 = flow{netip.MustParseAddr("fd00:1::1"), netip.MustParseAddr("fd00:2::1"), 40000, 443}
	flowB6 = flow{netip.MustParseAddr("fd00:1::2"), netip.MustParseAddr("fd00:2::1"), 40002, 443}
)

// tcpOpts is a timestamp option block (NOP NOP TS), as Linux sends.
var tcpOpts = []byte{1, 1, 8, 10, 0, 0, 0x12, 0x34, 0, 0, 0x56, 0x78}

type tcpSpec struct {
	f        flow
	id       uint16
	tos      uint8
	ttl      uint8
	seq, ack uint32
	flags    uint8
	window   uint16
	opts     []byte
	payload  []byte
}

// ipHeader writes an IP header for an l4len-byte transport payload.
func ipHeader(f flow, proto uint8, l4len int, id uint16, tos, ttl uint8) []byte {
	if ttl == 0 {
		ttl = 64
	}
	if f.src.Is4() {
		h := make([]byte, 20, 20+l4len)
		h[0] = 0x45
		h[1] = tos
		binary.BigEndian.PutUint16(h[2:], uint16(20+l4len))
		binary.BigEndian.PutUint16(h[4:], id)
		h[6] = 0x40 // DF
		h[8] = ttl
		h[9] = proto
		s, d := f.src.As4(), f.dst.As4()
		copy(h[12:], s[:])
		copy(h[16:], d[:])
		binary.BigEndian.PutUint16(h[10:], ^refFold(refSum(h)))
		return h
	}
	h := make([]byte, 40, 40+l4len)
	h[0] = 0x60 | tos>>4
	h[1] = tos<<4 | 0x0a // flow label bits
	h[2], h[3] = 0xbc, 0xde
	binary.BigEndian.PutUint16(h[4:], uint16(l4len))
	h[6] = proto
	h[7] = ttl
	s, d := f.src.As16(), f.dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return h
}

// buildTCP returns a TCP packet with correct checksums.
func buildTCP(s tcpSpec) []byte {
	thl := 20 + len(s.opts)
	l4len := thl + len(s.payload)
	p := ipHeader(s.f, 6, l4len, s.id, s.tos, s.ttl)
	ipl := len(p)
	p = p[:ipl+l4len]
	t := p[ipl:]
	binary.BigEndian.PutUint16(t[0:], s.f.sport)
	binary.BigEndian.PutUint16(t[2:], s.f.dport)
	binary.BigEndian.PutUint32(t[4:], s.seq)
	binary.BigEndian.PutUint32(t[8:], s.ack)
	t[12] = byte(thl/4) << 4
	t[13] = s.flags
	w := s.window
	if w == 0 {
		w = 501
	}
	binary.BigEndian.PutUint16(t[14:], w)
	copy(t[20:], s.opts)
	copy(t[thl:], s.payload)
	binary.BigEndian.PutUint16(t[16:], ^refFold(refPseudo(p, 6, l4len)+refSum(t)))
	return p
}

type udpSpec struct {
	f       flow
	id      uint16
	payload []byte
}

// buildUDP returns a UDP datagram with correct checksums (0 sent as 0xffff).
func buildUDP(s udpSpec) []byte {
	l4len := 8 + len(s.payload)
	p := ipHeader(s.f, 17, l4len, s.id, 0, 0)
	ipl := len(p)
	p = p[:ipl+l4len]
	u := p[ipl:]
	binary.BigEndian.PutUint16(u[0:], s.f.sport)
	binary.BigEndian.PutUint16(u[2:], s.f.dport)
	binary.BigEndian.PutUint16(u[4:], uint16(l4len))
	copy(u[8:], s.payload)
	c := ^refFold(refPseudo(p, 17, l4len) + refSum(u))
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(u[6:], c)
	return p
}

// superCase is a test packet to be handled as a super-packet of GSO type
// gso and segment size mss.
type superCase struct {
	name string
	pkt  []byte
	gso  uint8
	mss  int
}

// toSuper turns a packet built with correct checksums into what the kernel
// hands a TUN reader for a GSO packet: the transport checksum field holds the
// folded pseudo-header sum over the full transport length.
func toSuper(p []byte, gsoType uint8, gsoSize int) (VirtioNetHdr, []byte) {
	ipl, proto := 20, p[9]
	if p[0]>>4 == 6 {
		ipl, proto = 40, p[6]
	}
	l4len := len(p) - ipl
	off := 16
	hl := ipl + int(p[ipl+12]>>4)*4
	if proto == 17 {
		off = 6
		hl = ipl + 8
	}
	binary.BigEndian.PutUint16(p[ipl+off:], refFold(refPseudo(p, proto, l4len)))
	return VirtioNetHdr{
		Flags: FlagNeedsCsum, GSOType: gsoType, HdrLen: uint16(hl), GSOSize: uint16(gsoSize),
		CsumStart: uint16(ipl), CsumOffset: uint16(off),
	}, p
}

// verifyWire checks that p is a complete, self-consistent wire packet: IPv4
// header checksum and total length (or IPv6 payload length), UDP length, and
// the transport checksum.
func verifyWire(p []byte) error {
	if len(p) < 1 {
		return fmt.Errorf("empty packet")
	}
	var ipl int
	var proto uint8
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return fmt.Errorf("short IPv4 packet")
		}
		ipl, proto = int(p[0]&0xf)*4, p[9]
		if len(p) < ipl {
			return fmt.Errorf("IPv4 header length %d > %d", ipl, len(p))
		}
		if tl := int(binary.BigEndian.Uint16(p[2:])); tl != len(p) {
			return fmt.Errorf("IPv4 total length %d, packet %d", tl, len(p))
		}
		if refFold(refSum(p[:ipl])) != 0xffff {
			return fmt.Errorf("IPv4 header checksum %#04x does not verify", binary.BigEndian.Uint16(p[10:]))
		}
	case 6:
		if len(p) < 40 {
			return fmt.Errorf("short IPv6 packet")
		}
		ipl, proto = 40, p[6]
		if pl := int(binary.BigEndian.Uint16(p[4:])); pl != len(p)-40 {
			return fmt.Errorf("IPv6 payload length %d, packet %d", pl, len(p))
		}
	default:
		return fmt.Errorf("IP version %d", p[0]>>4)
	}
	l4 := p[ipl:]
	switch proto {
	case 6:
		if len(l4) < 20 {
			return fmt.Errorf("short TCP header")
		}
	case 17:
		if len(l4) < 8 {
			return fmt.Errorf("short UDP header")
		}
		if ul := int(binary.BigEndian.Uint16(l4[4:])); ul != len(l4) {
			return fmt.Errorf("UDP length %d, datagram %d", ul, len(l4))
		}
		if binary.BigEndian.Uint16(l4[6:]) == 0 {
			return fmt.Errorf("UDP checksum absent")
		}
	default:
		return nil
	}
	if refFold(refPseudo(p, proto, len(l4))+refSum(l4)) != 0xffff {
		return fmt.Errorf("transport checksum does not verify")
	}
	return nil
}

// payloadOf returns the transport payload of a TCP or UDP packet.
func payloadOf(p []byte) []byte {
	ipl, proto := int(p[0]&0xf)*4, p[9]
	if p[0]>>4 == 6 {
		ipl, proto = 40, p[6]
	}
	if proto == 17 {
		return p[ipl+8:]
	}
	return p[ipl+int(p[ipl+12]>>4)*4:]
}

// pattern returns n deterministic bytes starting at offset off.
func pattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		x := uint32(off + i)
		b[i] = byte(x*2654435761>>24) ^ byte(x)
	}
	return b
}

// bufs returns n buffers of size bytes each.
func bufs(n, size int) [][]byte {
	b := make([][]byte, n)
	for i := range b {
		b[i] = make([]byte, size)
	}
	return b
}

// tcpStream returns count consecutive TCP segments of flow f with payload
// size mss (the last one has lastLen bytes if > 0) and consecutive IPv4 IDs.
func tcpStream(f flow, seq uint32, id uint16, mss, count, lastLen int, lastFlags uint8) [][]byte {
	var out [][]byte
	off := 0
	for i := range count {
		n := mss
		fl := uint8(tcpACK)
		if i == count-1 {
			if lastLen > 0 {
				n = lastLen
			}
			fl |= lastFlags
		}
		out = append(out, buildTCP(tcpSpec{f: f, id: id + uint16(i), seq: seq + uint32(off), ack: 777, flags: fl, opts: tcpOpts, payload: pattern(off, n)}))
		off += n
	}
	return out
}

func equalPackets(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// arenaSize is the worst-case arena Coalesce needs for pkts.
func arenaSize(pkts [][]byte) int {
	n := 0
	for _, p := range pkts {
		n += VirtioNetHdrLen + len(p)
	}
	return n
}
