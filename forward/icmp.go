package forward

import (
	"encoding/binary"
	"net/netip"
)

// ICMP "fragmentation needed" (RFC 792, RFC 1191), the answer a router
// gives an IPv4 packet with Don't Fragment set that is larger than the
// next hop's MTU: path MTU discovery (RFC 1191) learns the path MTU from
// it. fragNeeded builds one; the forwarder writes it back into the device
// the packet came from, towards its sender.

// icmpMaxLen bounds the message: as much of the packet as fits in 576
// bytes is quoted, as RFC 1812 (4.3.2.3) asks of routers and Linux does.
const icmpMaxLen = 576

// fragNeeded writes into dst (at least icmpMaxLen bytes) the IPv4 ICMP
// Destination Unreachable, Fragmentation Needed message (type 3, code 4)
// that a router at address src sends about orig, an IPv4 packet too large
// for a next hop of MTU mtu, and returns its length. It returns 0 when orig
// gets no such answer: not a well-formed IPv4 packet, Don't Fragment not
// set, not the first fragment, an ICMP error message itself (RFC 1122
// 3.2.2), or from an address that cannot be answered (unspecified,
// multicast, broadcast, loopback). An invalid src stands for orig's
// destination address.
func fragNeeded(dst, orig []byte, mtu int, src netip.Addr) int {
	if len(orig) < 20 || orig[0]>>4 != 4 || src.IsValid() && !src.Is4() || len(dst) < icmpMaxLen {
		return 0
	}
	ihl := int(orig[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(orig[2:]))
	if ihl < 20 || len(orig) < ihl || total < ihl || total > len(orig) {
		return 0
	}
	flags := binary.BigEndian.Uint16(orig[6:])
	const df, offsetMask = 0x4000, 0x1fff
	if flags&df == 0 || flags&offsetMask != 0 {
		return 0
	}
	sender := netip.AddrFrom4([4]byte(orig[12:16]))
	if !sender.IsGlobalUnicast() {
		return 0
	}
	if orig[9] == 1 { // ICMP: answer queries only, never an error message
		if total < ihl+1 {
			return 0
		}
		switch orig[ihl] {
		case 0, 8, 13, 14, 17, 18: // echo reply, echo, timestamp(-reply), mask request/reply
		default:
			return 0
		}
	}
	quoted := min(total, icmpMaxLen-28)
	n := 28 + quoted
	clear(dst[:28])
	// IP header.
	dst[0] = 0x45
	dst[1] = 0xc0 // precedence "internetwork control", as Linux sends ICMP errors
	binary.BigEndian.PutUint16(dst[2:], uint16(n))
	dst[8] = 64 // TTL
	dst[9] = 1  // ICMP
	if src.IsValid() {
		s4 := src.As4()
		copy(dst[12:16], s4[:])
	} else {
		copy(dst[12:16], orig[16:20])
	}
	copy(dst[16:20], orig[12:16])
	binary.BigEndian.PutUint16(dst[10:], checksum(dst[:20]))
	// ICMP header, then the quoted packet.
	dst[20], dst[21] = 3, 4
	binary.BigEndian.PutUint16(dst[26:], uint16(mtu))
	copy(dst[28:n], orig[:quoted])
	binary.BigEndian.PutUint16(dst[22:], checksum(dst[20:n]))
	return n
}

// checksum is the Internet checksum (RFC 1071) of b.
func checksum(b []byte) uint16 {
	var sum uint32
	for len(b) >= 2 {
		sum += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
