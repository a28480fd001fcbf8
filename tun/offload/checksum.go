package offload

import (
	"encoding/binary"
	"math/bits"
)

// The Internet checksum (RFC 1071) is computed here in the little-endian
// domain: 64-bit little-endian loads are added with end-around carry, the
// total is folded to 16 bits, and the result is stored with a little-endian
// 16-bit store, which yields the same bytes as the big-endian 16-bit word
// algorithm of the RFC (the ones'-complement sum commutes with byte swapping).
// Every partial sum must start at an even offset of the checksummed data.

// sum adds b to the ones'-complement accumulator acc.
func sum(b []byte, acc uint64) uint64 {
	var c uint64
	for len(b) >= 64 {
		acc, c = sum32(b, acc, c)
		acc, c = sum32(b[32:], acc, c)
		b = b[64:]
	}
	if len(b) >= 32 {
		acc, c = sum32(b, acc, c)
		b = b[32:]
	}
	for len(b) >= 8 {
		acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		acc, c = bits.Add64(acc, uint64(binary.LittleEndian.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		acc, c = bits.Add64(acc, uint64(b[0]), c)
	}
	acc, c = bits.Add64(acc, 0, c)
	return acc + c // cannot carry again: acc is 0 whenever c was 1
}

// sum32 adds the first 32 bytes of b to acc with carry c (four 64-bit
// loads; small enough to be inlined in sum's unrolled loop).
func sum32(b []byte, acc, c uint64) (uint64, uint64) {
	_ = b[31]
	acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b), c)
	acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[8:]), c)
	acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[16:]), c)
	acc, c = bits.Add64(acc, binary.LittleEndian.Uint64(b[24:]), c)
	return acc, c
}

// addBE16 adds a 16-bit value given in network order semantics (e.g. a length
// or protocol number) to the accumulator.
func addBE16(acc uint64, v uint16) uint64 {
	acc, c := bits.Add64(acc, uint64(bits.ReverseBytes16(v)), 0)
	return acc + c
}

// fold reduces the accumulator to 16 bits (little-endian domain).
func fold(acc uint64) uint16 {
	hi, lo := acc>>32, acc&0xffffffff
	s := hi + lo // at most 33 bits
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// putCsum stores the complement of the folded accumulator at b[0:2].
func putCsum(b []byte, acc uint64) {
	binary.LittleEndian.PutUint16(b, ^fold(acc))
}

// pseudoSum returns the pseudo-header sum (RFC 793/768/8200) of an IPv4 or
// IPv6 packet for transport protocol proto and transport length l4len.
// ip is the IP header (at least 20 bytes for IPv4, 40 for IPv6).
func pseudoSum(ip []byte, v6 bool, proto uint8, l4len int) uint64 {
	var acc uint64
	if v6 {
		acc = sum(ip[8:40], 0)
		// IPv6 uses a 32-bit length; its high half is zero here.
	} else {
		acc = sum(ip[12:20], 0)
	}
	acc = addBE16(acc, uint16(proto))
	acc = addBE16(acc, uint16(l4len))
	return acc
}

// ipv4HeaderChecksum recomputes the header checksum of the IPv4 header h
// (h is exactly the header, IHL*4 bytes).
func ipv4HeaderChecksum(h []byte) {
	h[10], h[11] = 0, 0
	putCsum(h[10:], sum(h, 0))
}

// Checksum completes the partial checksum of a single packet read from a TUN
// device: if hdr.Flags has FlagNeedsCsum, it computes the Internet checksum of
// pkt[hdr.CsumStart:] (whose checksum field holds the pseudo-header sum) and
// stores it at hdr.CsumStart+hdr.CsumOffset, in place, as the kernel's
// skb_checksum_help does (a result of 0 is stored as 0xffff). Without
// FlagNeedsCsum it does nothing. It does not parse pkt, so it works for any
// protocol that uses the Internet checksum. It is an error to call it on a
// super-packet (use Segment).
func Checksum(hdr VirtioNetHdr, pkt []byte) error {
	if hdr.GSOType != GSONone {
		return errChecksumGSO
	}
	if hdr.Flags&FlagNeedsCsum == 0 {
		return nil
	}
	return completeCsum(pkt, int(hdr.CsumStart), int(hdr.CsumOffset))
}

func completeCsum(pkt []byte, start, off int) error {
	if start+off+2 > len(pkt) {
		return errCsumRange
	}
	field := pkt[start+off : start+off+2]
	c := ^fold(sum(pkt[start:], 0))
	if c == 0 {
		c = 0xffff
	}
	binary.LittleEndian.PutUint16(field, c)
	return nil
}
