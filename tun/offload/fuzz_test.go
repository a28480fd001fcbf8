package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// flowKeyOf returns a flow key for TCP/UDP packets over IPv4 (no
// fragments) or IPv6, or "" when p has none.
func flowKeyOf(p []byte) string {
	if len(p) < 1 {
		return ""
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return ""
		}
		ihl := int(p[0]&0xf) * 4
		if ihl < 20 || len(p) < ihl+4 || p[6]&0x1f != 0 || p[7] != 0 || (p[9] != 6 && p[9] != 17) {
			return ""
		}
		return string(p[9:10]) + string(p[12:20]) + string(p[ihl:ihl+4])
	case 6:
		if len(p) < 44 || (p[6] != 6 && p[6] != 17) {
			return ""
		}
		return string(p[6:7]) + string(p[8:40]) + string(p[40:44])
	}
	return ""
}

// checkFlowOrder fails unless every flow's packets appear in got in the
// order they have in want.
func checkFlowOrder(t *testing.T, got, want [][]byte) {
	t.Helper()
	seq := func(ps [][]byte) map[string][]string {
		m := map[string][]string{}
		for _, p := range ps {
			if k := flowKeyOf(p); k != "" {
				m[k] = append(m[k], string(p))
			}
		}
		return m
	}
	g, w := seq(got), seq(want)
	for k, ws := range w {
		gs := g[k]
		if len(gs) != len(ws) {
			t.Fatalf("flow has %d packets after coalescing, %d before", len(gs), len(ws))
		}
		for i := range ws {
			if gs[i] != ws[i] {
				t.Fatalf("flow order changed at packet %d", i)
			}
		}
	}
}

var (
	fuzzSegs  = bufs(512, 2048)
	fuzzSizes = make([]int, 512)
)

func FuzzSegment(f *testing.F) {
	add := func(h VirtioNetHdr, p []byte) {
		f.Add(h.Flags, h.GSOType, h.GSOSize, h.CsumStart, h.CsumOffset, p)
	}
	add(toSuper(buildTCP(tcpSpec{f: flowA4, seq: 1, flags: tcpACK | tcpPSH, opts: tcpOpts, payload: pattern(0, 700)}), GSOTCPv4, 200))
	add(toSuper(buildTCP(tcpSpec{f: flowA6, seq: 1, flags: tcpACK | tcpCWR, payload: pattern(0, 500)}), GSOTCPv6|GSOECN, 160))
	add(toSuper(buildUDP(udpSpec{f: flowA4, payload: pattern(0, 450)}), GSOUDPL4, 100))
	add(toSuper(buildUDP(udpSpec{f: flowA6, payload: pattern(0, 301)}), GSOUDPL4, 150))
	add(toSuper(buildTCP(tcpSpec{f: flowA4, seq: 1, flags: tcpACK, payload: pattern(0, 100)}), GSONone, 0))
	f.Fuzz(func(t *testing.T, flags, gsoType uint8, gsoSize, csumStart, csumOffset uint16, pkt []byte) {
		hdr := VirtioNetHdr{Flags: flags, GSOType: gsoType, GSOSize: gsoSize, CsumStart: csumStart, CsumOffset: csumOffset}
		orig := append([]byte(nil), pkt...)
		n, err := Segment(hdr, pkt, fuzzSegs, fuzzSizes)
		if !bytes.Equal(pkt, orig) {
			t.Fatal("Segment modified its input")
		}
		// WireSize counts what Segment cuts: its packets and their bytes.
		if wn, wb, werr := WireSize(hdr, pkt); err == nil {
			total := 0
			for _, sz := range fuzzSizes[:n] {
				total += sz
			}
			if werr != nil || wn != n || wb != total {
				t.Fatalf("WireSize = %d packets, %d bytes, %v; Segment made %d packets of %d bytes", wn, wb, werr, n, total)
			}
		} else if !errors.Is(err, ErrShortBuffer) && werr == nil {
			// (Segment's buffer errors are this harness's limits, not pkt's.)
			t.Fatalf("WireSize accepted what Segment refused (%v)", err)
		}
		// SegmentFrom in batches of 3 agrees with Segment.
		var batch [3][2048]byte
		out, sizes := [][]byte{batch[0][:], batch[1][:], batch[2][:]}, make([]int, 3)
		for first := 0; err != errTooFewBuffers; { // beyond 512 segments, only SegmentFrom can
			k, total, ferr := SegmentFrom(hdr, pkt, first, out, sizes)
			if (ferr == nil) != (err == nil) {
				t.Fatalf("SegmentFrom from %d: %v; Segment: %v", first, ferr, err)
			}
			if ferr != nil || k == 0 {
				if ferr == nil && (first != total || total != n) {
					t.Fatalf("SegmentFrom stopped at %d of %d; Segment made %d", first, total, n)
				}
				break
			}
			for j := range k {
				if !bytes.Equal(out[j][:sizes[j]], fuzzSegs[first+j][:fuzzSizes[first+j]]) {
					t.Fatalf("SegmentFrom segment %d differs from Segment's", first+j)
				}
			}
			first += k
		}
		if err != nil {
			if n != 0 {
				t.Fatalf("error with n = %d", n)
			}
			return
		}
		if gsoType == GSONone {
			if n != 1 || fuzzSizes[0] != len(pkt) {
				t.Fatalf("GSONone: n %d size %d", n, fuzzSizes[0])
			}
			out := fuzzSegs[0][:len(pkt)]
			if flags&FlagNeedsCsum == 0 {
				if !bytes.Equal(out, pkt) {
					t.Fatal("GSONone without NEEDS_CSUM changed the packet")
				}
			} else if csumOffset%2 == 0 {
				// The completed field plus the original partial sum must
				// cancel the rest of the data.
				s, at := int(csumStart), int(csumStart)+int(csumOffset)
				if refFold(refSum(out[s:])+uint32(binary.BigEndian.Uint16(pkt[at:]))) != 0xffff {
					t.Fatal("completed checksum does not verify")
				}
			}
			return
		}
		// A super-packet: every segment is a valid wire packet and the
		// payloads concatenate to the original payload.
		var joined []byte
		for i := range n {
			s := fuzzSegs[i][:fuzzSizes[i]]
			if err := verifyWire(s); err != nil {
				t.Fatalf("segment %d of %d: %v", i, n, err)
			}
			pl := payloadOf(s)
			if len(pl) > int(gsoSize) && n > 1 {
				t.Fatalf("segment %d payload %d > gso_size %d", i, len(pl), gsoSize)
			}
			joined = append(joined, pl...)
		}
		if !bytes.Equal(joined, payloadOf(pkt)) {
			t.Fatal("segment payloads do not reassemble the super-packet")
		}
	})
}

// splitPackets cuts fuzz input into packets: each starts with a length byte
// pair (big-endian, reduced modulo what is left).
func splitPackets(data []byte) [][]byte {
	var ps [][]byte
	for len(data) >= 2 && len(ps) < 200 {
		n := int(binary.BigEndian.Uint16(data))
		data = data[2:]
		n %= len(data) + 1
		ps = append(ps, data[:n:n])
		data = data[n:]
	}
	return ps
}

func joinPackets(ps ...[]byte) []byte {
	var b []byte
	for _, p := range ps {
		b = binary.BigEndian.AppendUint16(b, uint16(len(p)))
		b = append(b, p...)
	}
	return b
}

// FuzzCoalesce feeds arbitrary packet batches to Coalesce: it must not panic,
// and segmenting its output must give back exactly the input packets, with
// each flow in its original order.
func FuzzCoalesce(f *testing.F) {
	a := tcpStream(flowA4, 1, 1, 100, 4, 30, tcpPSH)
	b := tcpStream(flowA6, 9, 0, 64, 3, 0, 0)
	u := buildUDP(udpSpec{f: flowB4, id: 1, payload: pattern(0, 50)})
	u2 := buildUDP(udpSpec{f: flowB4, id: 2, payload: pattern(1, 50)})
	f.Add(joinPackets(a[0], b[0], a[1], u, b[1], a[2], u2, b[2], a[3]))
	f.Add(joinPackets(a[0], a[1], a[1], a[2]))
	f.Add(joinPackets(u, u2, u, []byte{0x45}, a[0]))
	f.Fuzz(func(t *testing.T, data []byte) {
		in := splitPackets(data)
		var c Coalescer
		out := make([][]byte, len(in))
		n, err := c.Coalesce(in, make([]byte, arenaSize(in)), out)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for i := range n {
			var h VirtioNetHdr
			if err := h.Decode(out[i]); err != nil {
				t.Fatal(err)
			}
			pkt := out[i][VirtioNetHdrLen:]
			if h == (VirtioNetHdr{}) {
				got = append(got, append([]byte(nil), pkt...))
				continue
			}
			k, err := Segment(h, pkt, fuzzSegs, fuzzSizes)
			if err != nil {
				t.Fatalf("result %d (%+v) does not segment: %v", i, h, err)
			}
			if k < 2 {
				t.Fatalf("result %d is a super-packet of %d segments", i, k)
			}
			for j := range k {
				got = append(got, append([]byte(nil), fuzzSegs[j][:fuzzSizes[j]]...))
			}
		}
		if len(got) != len(in) {
			t.Fatalf("%d packets out, %d in", len(got), len(in))
		}
		checkSameMultiset(t, got, in)
		checkFlowOrder(t, got, in)
	})
}

// FuzzCoalesceFlows builds valid TCP and UDP packets of four flows from a
// recipe (so that merging really happens, unlike with random bytes) with
// occasional sequence gaps, ID jumps, flags, size changes and corruption,
// and checks that segmenting Coalesce's output gives back the input exactly
// and that every result the kernel would trust (FlagNeedsCsum) contains only
// packets whose checksums verified.
func FuzzCoalesceFlows(f *testing.F) {
	f.Add([]byte{0, 0, 200, 0, 0, 0, 200, 0, 1, 0, 100, 0, 0, 0, 50, 8}, uint16(0))
	f.Add([]byte{2, 4, 0, 0, 2, 4, 0, 0, 3, 1, 0, 0, 2, 2, 0, 0x20}, uint16(3000))
	f.Fuzz(func(t *testing.T, recipe []byte, extra uint16) {
		flows := []flow{flowA4, flowA6, flowB4, flowB6}
		var seq [4]uint32
		var id [4]uint16
		var in [][]byte
		corrupted := map[string]bool{}
		for len(recipe) >= 4 && len(in) < 200 {
			op := recipe[:4]
			recipe = recipe[4:]
			fi := int(op[0] & 3)
			udp := op[0]&4 != 0
			n := 1 + int(binary.BigEndian.Uint16(op[1:]))%1400
			fl := op[3]
			if fl&1 != 0 {
				seq[fi] += 7 // gap
			}
			if fl&2 != 0 {
				id[fi] += 3 // ID jump
			}
			var p []byte
			if udp {
				p = buildUDP(udpSpec{f: flows[fi], id: id[fi], payload: pattern(int(seq[fi]), n)})
			} else {
				tf := uint8(tcpACK)
				tf |= fl & (tcpPSH | tcpFIN | tcpCWR | tcpECE)
				p = buildTCP(tcpSpec{f: flows[fi], id: id[fi], seq: seq[fi], ack: 1, flags: tf, opts: tcpOpts, payload: pattern(int(seq[fi]), n)})
			}
			if fl&4 != 0 {
				p[len(p)-1-int(op[1])%n] ^= 1 << (op[2] & 7)
				corrupted[string(p)] = true
			}
			seq[fi] += uint32(n)
			id[fi]++
			in = append(in, p)
		}
		// A Coalescer reused across calls, with a first call of another size.
		var c Coalescer
		out := make([][]byte, len(in)+1)
		arena := make([]byte, arenaSize(in)+int(extra)) // larger than needed is fine
		if _, err := c.Coalesce(in[:len(in)/2], arena, out); err != nil {
			t.Fatal(err)
		}
		k, err := c.Coalesce(in, arena, out)
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for i := range k {
			var h VirtioNetHdr
			_ = h.Decode(out[i])
			pkt := out[i][VirtioNetHdrLen:]
			if h == (VirtioNetHdr{}) {
				got = append(got, pkt)
				continue
			}
			m, err := Segment(h, pkt, fuzzSegs, fuzzSizes)
			if err != nil {
				t.Fatalf("result %d: %v", i, err)
			}
			for j := range m {
				s := append([]byte(nil), fuzzSegs[j][:fuzzSizes[j]]...)
				if corrupted[string(s)] {
					t.Fatal("a corrupted packet was merged into a trusted super-packet")
				}
				got = append(got, s)
			}
		}
		checkSameMultiset(t, got, in)
		checkFlowOrder(t, got, in)
	})
}
