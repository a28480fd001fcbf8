package offload

import (
	"bytes"
	"encoding/binary"
)

// MaxCoalesce is the largest number of wire packets merged into one
// super-packet (the kernel's GRO limit, and half of its UDP_MAX_SEGMENTS).
const MaxCoalesce = 64

// Coalescer merges wire packets that leave the emulator at the same instant
// into GSO super-packets, the reverse of Segment and the userspace
// counterpart of the kernel's GRO, so that one write(2) to a TUN device opened
// with IFF_VNET_HDR delivers a whole flow burst.
//
// The zero value is ready to use. A Coalescer keeps only scratch state between
// calls (reused, so steady-state calls do not allocate) and must not be used
// by two goroutines at once.
type Coalescer struct {
	groups []group
	next   []int32 // next[i]: the packet after pkts[i] in its group, or -1
	slots  []slot
	gen    uint32
}

// group is one output packet: a head packet and the packets appended to it.
type group struct {
	head, tail int32 // indexes into pkts
	hash       uint32
	v6         bool
	proto      uint8 // transport protocol of the flow
	merge      bool  // packets may be appended
	ipLen      int
	hdrLen     int // IP + transport header length (coalescible groups)
	gsoSize    int // payload length of the head packet
	count      int // packets in the group
	size       int // bytes of the resulting IP packet
	nextSeq    uint32
	nextID     uint16
	psh        bool // the last appended packet had PSH
}

type slot struct {
	gen   uint32
	group int32
}

// pktInfo is what classify learns about one wire packet.
type pktInfo struct {
	flow    bool // IP header and transport ports are readable
	merge   bool // a candidate for coalescing (well formed, checksums verified)
	v6      bool
	proto   uint8
	ipLen   int
	hdrLen  int
	payload int
	seq     uint32
	id      uint16
	psh     bool
}

// Coalesce merges pkts (IP packets, no virtio_net_hdr) into as few packets as
// it can. Each result, preceded by its virtio_net_hdr and ready for one
// write(2), is laid out in arena and returned as out[i] (a sub-slice of
// arena) for i < n.
//
// Packets i < j of one flow (same addresses, protocol and ports) are merged
// when they are consecutive in pkts among that flow's packets, and:
//   - TCP: j starts where i's data ends; headers are identical except for
//     the IPv4 ID (which must increment by one), lengths, checksums, sequence
//     number and PSH; none carries SYN, FIN, RST, URG or CWR; PSH may only be
//     on the last packet of a group; all payloads have the first packet's
//     size except the last, which may be smaller and ends the group.
//   - UDP: headers are identical except IPv4 ID (incrementing), lengths and
//     checksums; payload sizes as for TCP; no zero (absent) checksum.
//   - Every merged packet's IPv4 header checksum and transport checksum
//     verify. This matters: a super-packet is written with FlagNeedsCsum,
//     which the receiving kernel trusts, so a packet corrupted on the link
//     must not be merged, or the corruption would go undetected.
//   - A group holds at most MaxCoalesce packets and at most 65535 bytes of
//     IPv4 total length or IPv6 payload length.
//
// A merged group is written with the IP and transport headers of its first
// packet (total length, IPv4 header checksum, UDP length and PSH updated),
// FlagNeedsCsum, the pseudo-header sum in the checksum field, and GSOTCPv4,
// GSOTCPv6 or GSOUDPL4 with GSOSize equal to the first payload, so that the
// kernel's segmentation of it reproduces the input packets byte for byte.
// Every other packet is copied unchanged behind a zero header (GSONone, no
// flags), so the receiving kernel verifies its checksums as it would for a
// packet from a wire; malformed or corrupted packets are passed through this
// way, never dropped. Results are ordered by their first packet, so the
// order of packets within a flow is preserved.
//
// In the worst case (nothing merges) out needs len(pkts) entries and arena
// the total length of pkts plus VirtioNetHdrLen per packet; arena must not
// overlap pkts. The only errors wrap ErrShortBuffer, and nothing is written
// to arena or out when one is returned.
func (c *Coalescer) Coalesce(pkts [][]byte, arena []byte, out [][]byte) (n int, err error) {
	c.reset(len(pkts))
	for i, p := range pkts {
		info := classify(p)
		if !info.flow {
			c.start(i, p, info, 0)
			continue
		}
		h := flowHash(p, info)
		s := c.find(h, p, info, pkts)
		if sl := c.slots[s]; sl.gen == c.gen && info.merge && c.appendTo(int(sl.group), i, p, info, pkts) {
			continue
		}
		c.start(i, p, info, h)
		// The flow's newest group is the only one it may append to.
		c.slots[s] = slot{gen: c.gen, group: int32(len(c.groups) - 1)}
	}
	need := 0
	for i := range c.groups {
		need += VirtioNetHdrLen + c.groups[i].size
	}
	if len(out) < len(c.groups) || len(arena) < need {
		return 0, errCoalesceSpace
	}
	pos := 0
	for i := range c.groups {
		g := &c.groups[i]
		buf := arena[pos : pos+VirtioNetHdrLen+g.size]
		c.write(g, pkts, buf)
		out[i] = buf
		pos += len(buf)
	}
	return len(c.groups), nil
}

func (c *Coalescer) reset(npkts int) {
	c.groups = c.groups[:0]
	if cap(c.next) < npkts {
		c.next = make([]int32, npkts)
	}
	c.next = c.next[:npkts]
	want := 16
	for want < 2*npkts {
		want <<= 1
	}
	if len(c.slots) < want {
		c.slots = make([]slot, want)
		c.gen = 0
	}
	c.gen++
	if c.gen == 0 { // wrapped: stale entries could look current
		clear(c.slots)
		c.gen = 1
	}
}

// find returns the slot holding p's flow, or the empty slot where it belongs.
func (c *Coalescer) find(h uint32, p []byte, info pktInfo, pkts [][]byte) int {
	mask := len(c.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		s := c.slots[i]
		if s.gen != c.gen {
			return i
		}
		g := &c.groups[s.group]
		if g.hash == h && sameFlow(pkts[g.head], g, p, info) {
			return i
		}
	}
}

// sameFlow compares the flow key (addresses, protocol, ports) of the head
// packet of g with p.
func sameFlow(head []byte, g *group, p []byte, info pktInfo) bool {
	if g.v6 != info.v6 || g.proto != info.proto {
		return false
	}
	if info.v6 {
		if !bytes.Equal(head[8:40], p[8:40]) {
			return false
		}
	} else if !bytes.Equal(head[12:20], p[12:20]) {
		return false
	}
	return bytes.Equal(head[g.ipLen:g.ipLen+4], p[info.ipLen:info.ipLen+4])
}

// start opens a new group with pkts[i] as its head.
func (c *Coalescer) start(i int, p []byte, info pktInfo, h uint32) {
	c.next[i] = -1
	c.groups = append(c.groups, group{
		head:    int32(i),
		tail:    int32(i),
		hash:    h,
		v6:      info.v6,
		proto:   info.proto,
		merge:   info.merge && !info.psh,
		ipLen:   info.ipLen,
		hdrLen:  info.hdrLen,
		gsoSize: info.payload,
		count:   1,
		size:    len(p),
		nextSeq: info.seq + uint32(info.payload),
		nextID:  info.id + 1,
	})
}

// appendTo appends pkts[i] to group gi if the rules of Coalesce allow it.
func (c *Coalescer) appendTo(gi, i int, p []byte, info pktInfo, pkts [][]byte) bool {
	g := &c.groups[gi]
	if !g.merge || g.proto != info.proto || g.ipLen != info.ipLen || g.hdrLen != info.hdrLen ||
		info.payload > g.gsoSize || g.count >= MaxCoalesce {
		return false
	}
	ipPayload := g.size + info.payload
	if !g.v6 && ipPayload > maxIPPayload || g.v6 && ipPayload-ipv6Len > maxIPPayload {
		return false
	}
	head := pkts[g.head]
	// IP header: everything but lengths, ID and checksum.
	if g.v6 {
		if !bytes.Equal(head[0:4], p[0:4]) || !bytes.Equal(head[6:40], p[6:40]) {
			return false
		}
	} else {
		if !bytes.Equal(head[0:2], p[0:2]) || !bytes.Equal(head[6:10], p[6:10]) ||
			!bytes.Equal(head[12:20], p[12:20]) || info.id != g.nextID {
			return false
		}
	}
	th, tp := head[g.ipLen:g.hdrLen], p[info.ipLen:info.hdrLen]
	if g.proto == protoTCP {
		// Ports, ack, data offset, flags but PSH, window, urgent pointer, options.
		if info.seq != g.nextSeq || !bytes.Equal(th[0:4], tp[0:4]) || !bytes.Equal(th[8:13], tp[8:13]) ||
			th[13] != tp[13]&^tcpPSH || !bytes.Equal(th[14:16], tp[14:16]) || !bytes.Equal(th[18:], tp[18:]) {
			return false
		}
	} else if !bytes.Equal(th[0:4], tp[0:4]) {
		return false
	}
	c.next[g.tail] = int32(i)
	c.next[i] = -1
	g.tail = int32(i)
	g.size += info.payload
	g.count++
	g.nextSeq += uint32(info.payload)
	g.nextID++
	if info.payload < g.gsoSize || info.psh {
		g.merge = false
		g.psh = info.psh
	}
	return true
}

// write lays out group g in buf (exactly VirtioNetHdrLen+g.size bytes): its
// virtio_net_hdr, the head packet and the appended payloads, with the
// headers of a merged group fixed up.
func (c *Coalescer) write(g *group, pkts [][]byte, buf []byte) {
	pkt := buf[VirtioNetHdrLen:]
	off := copy(pkt, pkts[g.head])
	if g.count == 1 {
		VirtioNetHdr{}.put(buf)
		return
	}
	for i := c.next[g.head]; i >= 0; i = c.next[i] {
		off += copy(pkt[off:], pkts[i][g.hdrLen:])
	}
	hdr := VirtioNetHdr{
		Flags:     FlagNeedsCsum,
		HdrLen:    uint16(g.hdrLen),
		GSOSize:   uint16(g.gsoSize),
		CsumStart: uint16(g.ipLen),
	}
	if g.v6 {
		putBE16(pkt[4:], uint16(g.size-ipv6Len))
	} else {
		putBE16(pkt[2:], uint16(g.size))
		ipv4HeaderChecksum(pkt[:g.ipLen])
	}
	l4 := pkt[g.ipLen:]
	if g.proto == protoTCP {
		hdr.GSOType = GSOTCPv4
		if g.v6 {
			hdr.GSOType = GSOTCPv6
		}
		hdr.CsumOffset = tcpCsumOff
		if g.psh {
			l4[13] |= tcpPSH
		}
	} else {
		hdr.GSOType = GSOUDPL4
		hdr.CsumOffset = udpCsumOff
		putBE16(l4[4:], uint16(len(l4)))
	}
	binary.LittleEndian.PutUint16(l4[hdr.CsumOffset:], fold(pseudoSum(pkt, g.v6, g.proto, len(l4))))
	hdr.put(buf)
}

// classify parses p as far as Coalesce needs: the flow key, and whether p is
// a verified, well-formed candidate for merging.
func classify(p []byte) (info pktInfo) {
	if len(p) == 0 {
		return info
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) < ipv4MinLen {
			return info
		}
		info.ipLen = int(p[0]&0xf) * 4
		info.proto = p[9]
		if info.ipLen < ipv4MinLen || len(p) < info.ipLen+4 || p[6]&0x1f != 0 || p[7] != 0 {
			return info // no ports to read (or a non-first fragment)
		}
		if info.proto != protoTCP && info.proto != protoUDP {
			return info
		}
		info.flow = true
		info.id = be16(p[4:])
		if info.ipLen != ipv4MinLen || isFragment(p) || int(be16(p[2:])) != len(p) || fold(sum(p[:ipv4MinLen], 0)) != 0xffff {
			return info
		}
	case 6:
		if len(p) < ipv6Len+4 {
			return info
		}
		info.v6 = true
		info.ipLen = ipv6Len
		info.proto = p[6]
		if info.proto != protoTCP && info.proto != protoUDP {
			return info
		}
		info.flow = true
		if int(be16(p[4:])) != len(p)-ipv6Len {
			return info
		}
	default:
		return info
	}
	l4 := p[info.ipLen:]
	if info.proto == protoTCP {
		if len(l4) < tcpMinLen {
			return info
		}
		doff := int(l4[12]>>4) * 4
		if doff < tcpMinLen || doff > len(l4) {
			return info
		}
		info.hdrLen = info.ipLen + doff
		info.payload = len(l4) - doff
		info.seq = be32(l4[4:])
		info.psh = l4[13]&tcpPSH != 0
		// A stored 0xffff is a valid TCP checksum that the kernel's
		// segmentation never produces (it would write 0): merging such a
		// packet would not reproduce it byte for byte.
		if l4[13]&(tcpFIN|tcpSYN|tcpRST|tcpURG|tcpCWR) != 0 || info.payload == 0 || be16(l4[tcpCsumOff:]) == 0xffff {
			return info
		}
	} else {
		if len(l4) < udpLen || int(be16(l4[4:])) != len(l4) {
			return info
		}
		info.hdrLen = info.ipLen + udpLen
		info.payload = len(l4) - udpLen
		if info.payload == 0 || be16(l4[udpCsumOff:]) == 0 {
			return info
		}
	}
	if fold(sum(l4, pseudoSum(p, info.v6, info.proto, len(l4)))) != 0xffff {
		return info // corrupted: let the receiver's checksum check drop it
	}
	info.merge = true
	return info
}

// flowHash hashes p's addresses, protocol and ports.
func flowHash(p []byte, info pktInfo) uint32 {
	const m = 0x9e3779b97f4a7c15
	h := uint64(info.proto) + 1
	if info.v6 {
		for i := 8; i < 40; i += 8 {
			h = (h ^ binary.LittleEndian.Uint64(p[i:])) * m
		}
	} else {
		h = (h ^ binary.LittleEndian.Uint64(p[12:])) * m
	}
	h = (h ^ uint64(binary.LittleEndian.Uint32(p[info.ipLen:]))) * m
	return uint32(h ^ h>>32)
}
