package offload

import "fmt"

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
// super-packet whose payload fits in one segment yields one packet.
// Unsupported inputs (UFO, IPv4 fragments, IPv6 extension headers, lengths or
// offsets that disagree with the packet) return an error wrapping
// ErrMalformed; too few or too small buffers, one wrapping ErrShortBuffer.
// Segment never panics and does not allocate unless it returns an error.
func Segment(hdr VirtioNetHdr, pkt []byte, out [][]byte, sizes []int) (n int, err error) {
	if hdr.GSOType == GSONone {
		if len(out) < 1 || len(sizes) < 1 {
			return 0, fmt.Errorf("%w: need 1 output buffer and size, have %d and %d", ErrShortBuffer, len(out), len(sizes))
		}
		if len(out[0]) < len(pkt) {
			return 0, fmt.Errorf("%w: out[0] has %d bytes, packet needs %d", ErrShortBuffer, len(out[0]), len(pkt))
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

	var proto uint8
	var version byte // 0: either
	switch hdr.GSOType &^ (GSOECN | GSOAccECN) {
	case GSOTCPv4:
		proto, version = protoTCP, 4
	case GSOTCPv6:
		proto, version = protoTCP, 6
	case GSOUDPL4:
		if hdr.GSOType&(GSOECN|GSOAccECN) != 0 {
			return 0, fmt.Errorf("%w: gso_type %#x: ECN flags are only valid with TCP", ErrMalformed, hdr.GSOType)
		}
		proto = protoUDP
	case GSOUDP:
		return 0, fmt.Errorf("%w: gso_type UDP (UFO) is not supported; enable TUN_F_USO4/6, not TUN_F_UFO", ErrMalformed)
	default:
		return 0, fmt.Errorf("%w: unknown gso_type %#x", ErrMalformed, hdr.GSOType)
	}
	keepCWR := hdr.GSOType&GSOAccECN != 0
	mss := int(hdr.GSOSize)
	if mss == 0 {
		return 0, fmt.Errorf("%w: gso_size is 0 for gso_type %#x", ErrMalformed, hdr.GSOType)
	}

	// IP header.
	if len(pkt) < 1 {
		return 0, fmt.Errorf("%w: empty GSO packet", ErrMalformed)
	}
	v := pkt[0] >> 4
	if version != 0 && v != version {
		return 0, fmt.Errorf("%w: gso_type %#x needs IPv%d, packet is IP version %d", ErrMalformed, hdr.GSOType, version, v)
	}
	var ipLen int
	v6 := false
	switch v {
	case 4:
		if len(pkt) < ipv4MinLen {
			return 0, fmt.Errorf("%w: IPv4 packet of %d bytes is shorter than its header", ErrMalformed, len(pkt))
		}
		ipLen = int(pkt[0]&0xf) * 4
		if ipLen < ipv4MinLen || ipLen > len(pkt) {
			return 0, fmt.Errorf("%w: IPv4 header length %d invalid for a %d-byte packet", ErrMalformed, ipLen, len(pkt))
		}
		if tl := int(be16(pkt[2:])); tl != len(pkt) {
			return 0, fmt.Errorf("%w: IPv4 total length %d != packet length %d", ErrMalformed, tl, len(pkt))
		}
		if isFragment(pkt) {
			return 0, fmt.Errorf("%w: IPv4 GSO packet is a fragment", ErrMalformed)
		}
		if pkt[9] != proto {
			return 0, fmt.Errorf("%w: IPv4 protocol %d does not match gso_type %#x", ErrMalformed, pkt[9], hdr.GSOType)
		}
	case 6:
		v6 = true
		if len(pkt) < ipv6Len {
			return 0, fmt.Errorf("%w: IPv6 packet of %d bytes is shorter than its header", ErrMalformed, len(pkt))
		}
		ipLen = ipv6Len
		if pl := int(be16(pkt[4:])); pl != len(pkt)-ipv6Len {
			return 0, fmt.Errorf("%w: IPv6 payload length %d != packet length %d - 40", ErrMalformed, pl, len(pkt))
		}
		if pkt[6] != proto {
			return 0, fmt.Errorf("%w: IPv6 next header %d does not match gso_type %#x (extension headers are not supported)", ErrMalformed, pkt[6], hdr.GSOType)
		}
	default:
		return 0, fmt.Errorf("%w: IP version %d", ErrMalformed, v)
	}

	// Transport header.
	csumOff := tcpCsumOff
	l4HdrLen := udpLen
	if proto == protoTCP {
		if len(pkt)-ipLen < tcpMinLen {
			return 0, fmt.Errorf("%w: TCP header truncated (%d bytes after IP header)", ErrMalformed, len(pkt)-ipLen)
		}
		l4HdrLen = int(pkt[ipLen+12]>>4) * 4
		if l4HdrLen < tcpMinLen || ipLen+l4HdrLen > len(pkt) {
			return 0, fmt.Errorf("%w: TCP data offset %d invalid for %d bytes after IP header", ErrMalformed, l4HdrLen, len(pkt)-ipLen)
		}
	} else {
		csumOff = udpCsumOff
		if len(pkt)-ipLen < udpLen {
			return 0, fmt.Errorf("%w: UDP header truncated (%d bytes after IP header)", ErrMalformed, len(pkt)-ipLen)
		}
		if ul := int(be16(pkt[ipLen+4:])); ul != len(pkt)-ipLen {
			return 0, fmt.Errorf("%w: UDP length %d != %d bytes after IP header", ErrMalformed, ul, len(pkt)-ipLen)
		}
	}
	if hdr.Flags&FlagNeedsCsum != 0 && (int(hdr.CsumStart) != ipLen || int(hdr.CsumOffset) != csumOff) {
		return 0, fmt.Errorf("%w: csum_start %d / csum_offset %d, want %d / %d for this packet", ErrMalformed, hdr.CsumStart, hdr.CsumOffset, ipLen, csumOff)
	}

	hdrLen := ipLen + l4HdrLen
	payload := pkt[hdrLen:]
	n = 1
	if len(payload) > mss {
		n = (len(payload) + mss - 1) / mss
	}
	if len(out) < n || len(sizes) < n {
		return 0, fmt.Errorf("%w: %d segments need %d buffers and sizes, have %d and %d", ErrShortBuffer, n, n, len(out), len(sizes))
	}
	for i := range n {
		need := hdrLen + min(mss, len(payload)-i*mss)
		if len(out[i]) < need {
			return 0, fmt.Errorf("%w: out[%d] has %d bytes, segment needs %d", ErrShortBuffer, i, len(out[i]), need)
		}
	}

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
	for i := range n {
		chunk := payload[i*mss : min((i+1)*mss, len(payload))]
		segLen := hdrLen + len(chunk)
		seg := out[i][:segLen]
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
			if i != n-1 {
				f &^= tcpFIN | tcpPSH
			}
			if i != 0 && !keepCWR {
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
		sizes[i] = segLen
	}
	return n, nil
}
