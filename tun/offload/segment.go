package offload

// Segment cuts pkt, one packet read from a TUN device opened with
// IFF_VNET_HDR (without its virtio_net_hdr, which the caller decoded into
// hdr), into the wire packets it stands for, as the kernel's GSO would on a
// device without offloads. Segment i is written to out[i][:sizes[i]]; n is
// the number of segments.
//
//   - GSONone: pkt is copied to out[0]; with FlagNeedsCsum its partial
//     checksum is completed in the copy (see Checksum).
//   - GSOTCPv4, GSOTCPv6 (optionally with GSOECN or GSOAccECN): every segment
//     gets a copy of the IP and TCP headers with its own IPv4 total length,
//     consecutive IPv4 IDs and a fresh header checksum (or the IPv6 payload
//     length), the sequence number of its first byte, FIN and PSH only on the
//     last segment, CWR only on the first (on all with GSOAccECN), and a
//     complete TCP checksum.
//   - GSOUDPL4: every segment is a UDP datagram of hdr.GSOSize payload bytes
//     (the last may be shorter) with its own UDP length and complete checksum
//     (0 is sent as 0xffff), and IPv4 IDs incremented as for TCP.
//
// Every output packet is a normal wire packet with complete checksums, so a
// bit flipped later is detected by the receiver. Segment needs
// ceil(payload/GSOSize) buffers, each at least headers+GSOSize bytes; a
// super-packet whose payload fits in one segment yields one packet (see
// SegmentFrom to segment in batches, with fewer buffers).
// Unsupported inputs (UFO, IPv4 fragments, IPv6 extension headers, lengths or
// offsets that disagree with the packet) return an error wrapping
// ErrMalformed; too few or too small buffers, one wrapping ErrShortBuffer.
// Nothing is written to out on error. Segment never panics and never
// allocates, not even on error (its errors are preallocated).
func Segment(hdr VirtioNetHdr, pkt []byte, out [][]byte, sizes []int) (n int, err error) {
	var g gso
	if err := g.parse(hdr, pkt); err != nil {
		return 0, err
	}
	if len(out) < g.total || len(sizes) < g.total {
		if g.total == 1 {
			return 0, errNoBuffer
		}
		return 0, errTooFewBuffers
	}
	return g.write(hdr, pkt, 0, out[:g.total], sizes)
}

// SegmentFrom is Segment in batches: it writes segments first, first+1, ...
// of pkt (numbered as Segment numbers them) to out[0], out[1], ..., as many
// as out and sizes hold and the super-packet has, and returns how many it
// wrote and the super-packet's total number of segments. Calling it with
// first = 0, then first += n until first == total, yields exactly Segment's
// output with a bounded number of buffers per call; with no buffers at all
// (len(out) == 0) it only validates pkt and counts its segments. Its errors
// are Segment's (on error n is 0, total is 0 for a malformed pkt, and
// nothing is written), plus one wrapping ErrShortBuffer for a first outside
// [0, total]. It never panics and never allocates.
func SegmentFrom(hdr VirtioNetHdr, pkt []byte, first int, out [][]byte, sizes []int) (n, total int, err error) {
	var g gso
	if err := g.parse(hdr, pkt); err != nil {
		return 0, 0, err
	}
	if first < 0 || first > g.total {
		return 0, g.total, errFirstRange
	}
	k := min(len(out), len(sizes), g.total-first)
	if k == 0 {
		return 0, g.total, nil
	}
	n, err = g.write(hdr, pkt, first, out[:k], sizes)
	return n, g.total, err
}

// WireSize returns how many wire packets super-packet pkt (hdr its decoded
// virtio_net_hdr) stands for and their total IP bytes, headers included:
// what Segment would cut it into, counted without cutting. Its errors are
// those Segment would return for pkt. It never panics and never allocates.
func WireSize(hdr VirtioNetHdr, pkt []byte) (packets, bytes int, err error) {
	var g gso
	if err := g.parse(hdr, pkt); err != nil {
		return 0, 0, err
	}
	if g.none {
		return 1, len(pkt), nil
	}
	return g.total, g.payloadN + g.total*g.hdrLen, nil
}

// gso is a validated super-packet's layout.
type gso struct {
	none     bool // GSONone: one packet, copied as is
	proto    uint8
	v6       bool
	keepCWR  bool
	mss      int
	ipLen    int
	hdrLen   int // IP + transport headers
	csumOff  int // offset of the checksum in the transport header
	total    int // segments
	payloadN int // payload bytes
}

// parse validates hdr and pkt and fills g.
func (g *gso) parse(hdr VirtioNetHdr, pkt []byte) error {
	if hdr.GSOType == GSONone {
		if hdr.Flags&FlagNeedsCsum != 0 && int(hdr.CsumStart)+int(hdr.CsumOffset)+2 > len(pkt) {
			return errCsumRange
		}
		*g = gso{none: true, total: 1}
		return nil
	}
	var version byte // 0: either
	switch hdr.GSOType &^ (GSOECN | GSOAccECN) {
	case GSOTCPv4:
		g.proto, version = protoTCP, 4
	case GSOTCPv6:
		g.proto, version = protoTCP, 6
	case GSOUDPL4:
		if hdr.GSOType&(GSOECN|GSOAccECN) != 0 {
			return errECNOnUDP
		}
		g.proto = protoUDP
	case GSOUDP:
		return errUFO
	default:
		return errGSOType
	}
	g.keepCWR = hdr.GSOType&GSOAccECN != 0
	g.mss = int(hdr.GSOSize)
	if g.mss == 0 {
		return errGSOSizeZero
	}

	// IP header.
	if len(pkt) < 1 {
		return errEmpty
	}
	v := pkt[0] >> 4
	if version != 0 && v != version && (v == 4 || v == 6) {
		if version == 4 {
			return errNeedsIPv4
		}
		return errNeedsIPv6
	}
	switch v {
	case 4:
		if len(pkt) < ipv4MinLen {
			return errIPv4Short
		}
		g.ipLen = int(pkt[0]&0xf) * 4
		if g.ipLen < ipv4MinLen || g.ipLen > len(pkt) {
			return errIPv4IHL
		}
		if int(be16(pkt[2:])) != len(pkt) {
			return errIPv4TotalLen
		}
		if isFragment(pkt) {
			return errIPv4Fragment
		}
		if pkt[9] != g.proto {
			return errIPv4Proto
		}
	case 6:
		g.v6 = true
		if len(pkt) < ipv6Len {
			return errIPv6Short
		}
		g.ipLen = ipv6Len
		if int(be16(pkt[4:])) != len(pkt)-ipv6Len {
			return errIPv6PayloadLen
		}
		if pkt[6] != g.proto {
			return errIPv6NextHdr
		}
	default:
		return errIPVersion
	}

	// Transport header.
	g.csumOff = tcpCsumOff
	l4HdrLen := udpLen
	if g.proto == protoTCP {
		if len(pkt)-g.ipLen < tcpMinLen {
			return errTCPTruncated
		}
		l4HdrLen = int(pkt[g.ipLen+12]>>4) * 4
		if l4HdrLen < tcpMinLen || g.ipLen+l4HdrLen > len(pkt) {
			return errTCPDataOff
		}
	} else {
		g.csumOff = udpCsumOff
		if len(pkt)-g.ipLen < udpLen {
			return errUDPTruncated
		}
		if int(be16(pkt[g.ipLen+4:])) != len(pkt)-g.ipLen {
			return errUDPLen
		}
	}
	if hdr.Flags&FlagNeedsCsum != 0 && (int(hdr.CsumStart) != g.ipLen || int(hdr.CsumOffset) != g.csumOff) {
		return errCsumStart
	}
	g.hdrLen = g.ipLen + l4HdrLen
	g.payloadN = len(pkt) - g.hdrLen
	g.total = 1
	if g.payloadN > g.mss {
		g.total = (g.payloadN + g.mss - 1) / g.mss
	}
	return nil
}

// write writes segments first..first+len(out)-1 (len(out) >= 1, all of
// them existing) to out and sizes, after checking every buffer.
func (g *gso) write(hdr VirtioNetHdr, pkt []byte, first int, out [][]byte, sizes []int) (int, error) {
	if g.none {
		if len(out[0]) < len(pkt) {
			return 0, errSmallBuffer
		}
		copy(out[0], pkt)
		if hdr.Flags&FlagNeedsCsum != 0 {
			if err := completeCsum(out[0][:len(pkt)], int(hdr.CsumStart), int(hdr.CsumOffset)); err != nil {
				return 0, err
			}
		}
		sizes[0] = len(pkt)
		return 1, nil
	}
	mss := g.mss
	payload := pkt[g.hdrLen:]
	for j := range out {
		i := first + j
		if len(out[j]) < g.hdrLen+min(mss, len(payload)-i*mss) {
			return 0, errSmallBuffer
		}
	}

	ipLen, hdrLen, v6, proto, csumOff := g.ipLen, g.hdrLen, g.v6, g.proto, g.csumOff
	pseudo := pseudoSum(pkt, v6, proto, 0)
	var id uint16
	var ipSum uint64 // IPv4 header sum without total length, ID and checksum
	if !v6 {
		id = be16(pkt[4:])
		ipSum = sum(pkt[:ipLen], 0)
		for _, off := range [...]int{2, 4, 10} { // subtract = add the complement
			ipSum = addBE16(ipSum, ^be16(pkt[off:]))
		}
	}
	var seq uint32
	var flags uint8
	if proto == protoTCP {
		seq = be32(pkt[ipLen+4:])
		flags = pkt[ipLen+13]
	}
	for j := range out {
		i := first + j
		chunk := payload[i*mss : min((i+1)*mss, len(payload))]
		segLen := hdrLen + len(chunk)
		seg := out[j][:segLen]
		copy(seg, pkt[:hdrLen])
		copy(seg[hdrLen:], chunk)
		if v6 {
			putBE16(seg[4:], uint16(segLen-ipv6Len))
		} else {
			segID := id + uint16(i)
			putBE16(seg[2:], uint16(segLen))
			putBE16(seg[4:], segID)
			c := ^fold(addBE16(addBE16(ipSum, uint16(segLen)), segID))
			seg[10], seg[11] = byte(c), byte(c>>8) // little-endian domain store
		}
		l4 := seg[ipLen:]
		if proto == protoTCP {
			putBE32(l4[4:], seq+uint32(i*mss))
			f := flags
			if i != g.total-1 {
				f &^= tcpFIN | tcpPSH
			}
			if i != 0 && !g.keepCWR {
				f &^= tcpCWR
			}
			l4[13] = f
		} else {
			putBE16(l4[4:], uint16(len(l4)))
		}
		l4[csumOff], l4[csumOff+1] = 0, 0
		c := ^fold(sum(l4, addBE16(pseudo, uint16(len(l4)))))
		if c == 0 && proto == protoUDP {
			c = 0xffff
		}
		l4[csumOff], l4[csumOff+1] = byte(c), byte(c>>8) // little-endian domain store
		sizes[j] = segLen
	}
	return len(out), nil
}
