package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// outPkt is one Coalesce result, decoded.
type outPkt struct {
	hdr VirtioNetHdr
	pkt []byte
}

// coalesceN coalesces pkts with a new Coalescer and fails unless that
// gives want results.
func coalesceN(t *testing.T, pkts [][]byte, want int) []outPkt {
	t.Helper()
	var c Coalescer
	res := coalesce(t, &c, pkts)
	if len(res) != want {
		t.Fatalf("%d results, want %d", len(res), want)
	}
	return res
}

func coalesce(t *testing.T, c *Coalescer, pkts [][]byte) []outPkt {
	t.Helper()
	arena, out := make([]byte, arenaSize(pkts)), make([][]byte, len(pkts))
	n, err := c.Coalesce(pkts, arena, out)
	if err != nil {
		t.Fatal(err)
	}
	res := make([]outPkt, n)
	for i := range n {
		if err := res[i].hdr.Decode(out[i]); err != nil {
			t.Fatal(err)
		}
		res[i].pkt = out[i][VirtioNetHdrLen:]
	}
	return res
}

// resegment runs Segment on every result and returns all wire packets.
func resegment(t *testing.T, res []outPkt) [][]byte {
	t.Helper()
	var all [][]byte
	for i, r := range res {
		out, sizes := bufs(MaxCoalesce, 65535), make([]int, MaxCoalesce)
		n, err := Segment(r.hdr, r.pkt, out, sizes)
		if err != nil {
			t.Fatalf("result %d: %v", i, err)
		}
		for j := range n {
			all = append(all, out[j][:sizes[j]])
		}
	}
	return all
}

// checkSuper verifies the kernel-facing form of a merged result.
func checkSuper(t *testing.T, r outPkt, gsoType uint8, gsoSize, count int) {
	t.Helper()
	p := r.pkt
	ipl, proto, off := 20, uint8(6), 16
	if p[0]>>4 == 6 {
		ipl = 40
		proto = p[6]
	} else {
		proto = p[9]
	}
	hl := ipl + 8
	if proto == 17 {
		off = 6
	} else {
		hl = ipl + int(p[ipl+12]>>4)*4
	}
	want := VirtioNetHdr{Flags: FlagNeedsCsum, GSOType: gsoType, HdrLen: uint16(hl), GSOSize: uint16(gsoSize), CsumStart: uint16(ipl), CsumOffset: uint16(off)}
	if r.hdr != want {
		t.Fatalf("header %+v, want %+v", r.hdr, want)
	}
	if ipl == 20 {
		if tl := int(binary.BigEndian.Uint16(p[2:])); tl != len(p) {
			t.Fatalf("IPv4 total length %d, packet %d", tl, len(p))
		}
		if refFold(refSum(p[:20])) != 0xffff {
			t.Fatal("IPv4 header checksum does not verify")
		}
	} else if pl := int(binary.BigEndian.Uint16(p[4:])); pl != len(p)-40 {
		t.Fatalf("IPv6 payload length %d, packet %d", pl, len(p))
	}
	if proto == 17 && int(binary.BigEndian.Uint16(p[ipl+4:])) != len(p)-ipl {
		t.Fatal("UDP length does not cover the super-packet")
	}
	if c, ps := binary.BigEndian.Uint16(p[ipl+off:]), refFold(refPseudo(p, proto, len(p)-ipl)); c != ps {
		t.Fatalf("checksum field %#04x, want pseudo-header sum %#04x", c, ps)
	}
	if n := (len(p) - hl + gsoSize - 1) / gsoSize; n != count {
		t.Fatalf("super-packet holds %d segments, want %d", n, count)
	}
}

func TestCoalesceTCPStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    flow
		gso  uint8
	}{{"v4", flowA4, GSOTCPv4}, {"v6", flowA6, GSOTCPv6}} {
		t.Run(tc.name, func(t *testing.T) {
			in := tcpStream(tc.f, 1000, 7, 1448, 10, 500, tcpPSH)
			res := coalesceN(t, in, 1)
			checkSuper(t, res[0], tc.gso, 1448, 10)
			// Byte-exact against the super-packet the kernel would hand us.
			all := append([]byte(nil), payloadOf(in[0])...)
			for _, p := range in[1:] {
				all = append(all, payloadOf(p)...)
			}
			_, want := toSuper(buildTCP(tcpSpec{f: tc.f, id: 7, seq: 1000, ack: 777, flags: tcpACK | tcpPSH, opts: tcpOpts, payload: all}), tc.gso, 1448)
			if !bytes.Equal(res[0].pkt, want) {
				t.Fatal("super-packet differs from the reference")
			}
			if got := resegment(t, res); !equalPackets(got, in) {
				t.Fatal("Segment(Coalesce(x)) != x")
			}
		})
	}
}

func TestCoalesceUDP(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    flow
	}{{"v4", flowA4}, {"v6", flowA6}} {
		t.Run(tc.name, func(t *testing.T) {
			var in [][]byte
			for i := range 6 {
				n := 1200
				if i == 5 {
					n = 300
				}
				in = append(in, buildUDP(udpSpec{f: tc.f, id: uint16(100 + i), payload: pattern(i*1200, n)}))
			}
			res := coalesceN(t, in, 1)
			checkSuper(t, res[0], GSOUDPL4, 1200, 6)
			if got := resegment(t, res); !equalPackets(got, in) {
				t.Fatal("Segment(Coalesce(x)) != x")
			}
		})
	}
}

func TestCoalesceSplits(t *testing.T) {
	a := tcpStream(flowA4, 1, 1, 1448, 6, 0, 0)
	b := tcpStream(flowB4, 1, 50, 1448, 4, 0, 0)
	corrupt := func(p []byte) []byte { q := append([]byte(nil), p...); q[len(q)-1] ^= 0x10; return q }
	withFlags := func(p []byte, set uint8) []byte {
		q := append([]byte(nil), p...)
		q[33] |= set
		binary.BigEndian.PutUint16(q[36:], 0)
		binary.BigEndian.PutUint16(q[36:], ^refFold(refPseudo(q, 6, len(q)-20)+refSum(q[20:])))
		return q
	}
	mutIP := func(p []byte, at int, v byte) []byte {
		q := append([]byte(nil), p...)
		q[at] = v
		binary.BigEndian.PutUint16(q[10:], 0)
		binary.BigEndian.PutUint16(q[10:], ^refFold(refSum(q[:20])))
		return q
	}
	gap := tcpStream(flowA4, 1+3*1448+1, 4, 1448, 1, 0, 0)[0]
	for _, tc := range []struct {
		name   string
		in     [][]byte
		counts []int // packets per result, in order
	}{
		{"interleaved flows", [][]byte{a[0], b[0], a[1], b[1], a[2], b[2]}, []int{3, 3}},
		{"sequence gap", [][]byte{a[0], a[1], a[2], gap, a[4]}, []int{3, 1, 1}},
		{"out of order (kept in input order)", [][]byte{a[1], a[0], a[2], a[3]}, []int{1, 1, 2}},
		{"PSH ends group", [][]byte{a[0], withFlags(a[1], tcpPSH), a[2], a[3]}, []int{2, 2}},
		{"FIN alone", [][]byte{a[0], a[1], withFlags(a[2], tcpFIN)}, []int{2, 1}},
		{"CWR alone", [][]byte{withFlags(a[0], tcpCWR), a[1], a[2]}, []int{1, 2}},
		{"corrupted packet alone", [][]byte{a[0], a[1], corrupt(a[2]), a[3], a[4]}, []int{2, 1, 2}},
		{"corrupted head", [][]byte{corrupt(a[0]), a[1], a[2]}, []int{1, 2}},
		{"TOS differs", [][]byte{a[0], mutIP(a[1], 1, 0x03), a[2]}, []int{1, 1, 1}},
		{"IPv4 ID not consecutive", [][]byte{a[0], mutIP(a[1], 5, 0x99)}, []int{1, 1}},
		{"TTL differs", [][]byte{a[0], a[1], mutIP(a[2], 8, 3)}, []int{2, 1}},
		{"ack differs", [][]byte{a[0], buildTCP(tcpSpec{f: flowA4, id: 2, seq: 1 + 1448, ack: 778, flags: tcpACK, opts: tcpOpts, payload: pattern(1448, 1448)})}, []int{1, 1}},
		{"options differ", [][]byte{a[0], buildTCP(tcpSpec{f: flowA4, id: 2, seq: 1 + 1448, ack: 777, flags: tcpACK, opts: []byte{1, 1, 8, 10, 0, 0, 0x12, 0x35, 0, 0, 0x56, 0x78}, payload: pattern(1448, 1448)})}, []int{1, 1}},
		{"larger after smaller", [][]byte{tcpStream(flowA4, 1, 1, 1000, 1, 0, 0)[0], buildTCP(tcpSpec{f: flowA4, id: 2, seq: 1001, ack: 777, flags: tcpACK, opts: tcpOpts, payload: pattern(1000, 1448)})}, []int{1, 1}},
		{"pure ACKs", [][]byte{buildTCP(tcpSpec{f: flowA4, id: 1, seq: 1, ack: 5, flags: tcpACK}), buildTCP(tcpSpec{f: flowA4, id: 2, seq: 1, ack: 5, flags: tcpACK})}, []int{1, 1}},
		{"not IP", [][]byte{{0x00, 1, 2, 3}, a[0], {}, a[1]}, []int{1, 2, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Coalescer
			res := coalesce(t, &c, tc.in)
			var counts []int
			for _, r := range res {
				n := 1
				if r.hdr.GSOType != GSONone {
					n = (len(r.pkt) - int(r.hdr.HdrLen) + int(r.hdr.GSOSize) - 1) / int(r.hdr.GSOSize)
				} else if r.hdr != (VirtioNetHdr{}) {
					t.Fatalf("single packet with header %+v, want zero", r.hdr)
				}
				counts = append(counts, n)
			}
			if len(counts) != len(tc.counts) {
				t.Fatalf("results %v, want %v", counts, tc.counts)
			}
			for i := range counts {
				if counts[i] != tc.counts[i] {
					t.Fatalf("results %v, want %v", counts, tc.counts)
				}
			}
			// Resegmenting gives back every input, each flow in its order.
			got := resegment(t, res)
			if len(got) != len(tc.in) {
				t.Fatalf("%d packets after Segment, want %d", len(got), len(tc.in))
			}
			checkSameMultiset(t, got, tc.in)
		})
	}
}

func checkSameMultiset(t *testing.T, got, want [][]byte) {
	t.Helper()
	m := map[string]int{}
	for _, p := range want {
		m[string(p)]++
	}
	for _, p := range got {
		m[string(p)]--
	}
	for _, v := range m {
		if v != 0 {
			t.Fatal("output packets are not the input packets")
		}
	}
}

func TestCoalesceLimits(t *testing.T) {
	t.Run("MaxCoalesce", func(t *testing.T) {
		in := tcpStream(flowA6, 1, 0, 600, 100, 0, 0)
		res := coalesceN(t, in, 2)
		checkSuper(t, res[0], GSOTCPv6, 600, MaxCoalesce)
		checkSuper(t, res[1], GSOTCPv6, 600, 100-MaxCoalesce)
		if !equalPackets(resegment(t, res), in) {
			t.Fatal("round trip")
		}
	})
	t.Run("64KB IPv4", func(t *testing.T) {
		// 20 + 32 + 45*1448 = 65212 fits; a 46th segment would not.
		in := tcpStream(flowA4, 1, 0, 1448, 50, 0, 0)
		res := coalesceN(t, in, 2)
		checkSuper(t, res[0], GSOTCPv4, 1448, 45)
		checkSuper(t, res[1], GSOTCPv4, 1448, 5)
	})
	t.Run("exact buffers", func(t *testing.T) {
		// Two results: a merged group of 3 and a lone SYN.
		in := tcpStream(flowA4, 1, 0, 1000, 3, 0, 0)
		in = append(in, buildTCP(tcpSpec{f: flowB4, flags: tcpSYN}))
		need := VirtioNetHdrLen + 20 + 32 + 3000 + VirtioNetHdrLen + 40
		var c Coalescer
		arena := make([]byte, need+5)
		for i := range arena {
			arena[i] = 0xee
		}
		out := make([][]byte, 2)
		if n, err := c.Coalesce(in, arena[:need], out); err != nil || n != 2 {
			t.Fatalf("n %d err %v", n, err)
		}
		if len(out[0])+len(out[1]) != need || &out[1][0] != &arena[len(out[0])] {
			t.Fatal("results are not packed back to back in the arena")
		}
		if !bytes.Equal(arena[need:], []byte{0xee, 0xee, 0xee, 0xee, 0xee}) {
			t.Fatal("Coalesce wrote past the bytes it needed")
		}
		if _, err := c.Coalesce(in, arena[:need-1], out); !errors.Is(err, ErrShortBuffer) {
			t.Fatalf("arena one byte short: %v", err)
		}
		if _, err := c.Coalesce(in, arena, out[:1]); !errors.Is(err, ErrShortBuffer) {
			t.Fatalf("too few out entries: %v", err)
		}
	})
}

func TestCoalesceUDPRules(t *testing.T) {
	u := func(f flow, id uint16, n int) []byte {
		return buildUDP(udpSpec{f: f, id: id, payload: pattern(int(id), n)})
	}
	noCsum := u(flowA4, 3, 1200)
	binary.BigEndian.PutUint16(noCsum[26:], 0)
	other := flowA4
	other.dport = 4433
	for _, tc := range []struct {
		name   string
		in     [][]byte
		counts int
	}{
		{"same size", [][]byte{u(flowA4, 1, 1200), u(flowA4, 2, 1200), u(flowA4, 3, 1200)}, 1},
		{"short ends group", [][]byte{u(flowA4, 1, 1200), u(flowA4, 2, 100), u(flowA4, 3, 1200)}, 2},
		{"larger second", [][]byte{u(flowA4, 1, 1000), u(flowA4, 2, 1200)}, 2},
		{"no checksum", [][]byte{u(flowA4, 1, 1200), u(flowA4, 2, 1200), noCsum}, 2},
		{"different port", [][]byte{u(flowA4, 1, 1200), u(other, 2, 1200), u(flowA4, 2, 1200)}, 2},
		{"v6 flows", [][]byte{u(flowA6, 0, 1200), u(flowB6, 0, 1200), u(flowA6, 0, 1200), u(flowB6, 0, 1200)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := coalesceN(t, tc.in, tc.counts)
			checkSameMultiset(t, resegment(t, res), tc.in)
		})
	}
}

// TestCoalesceReuse checks that scratch state from one call does not leak
// into the next (the flow table is generation-stamped, not cleared).
func TestCoalesceReuse(t *testing.T) {
	var c Coalescer
	a := tcpStream(flowA4, 1, 1, 1448, 6, 0, 0)
	if res := coalesce(t, &c, a[:3]); len(res) != 1 {
		t.Fatalf("first call: %d results", len(res))
	}
	// The continuation arrives in a later call: it must start a new group,
	// not be appended to a buffer from the previous call.
	res := coalesce(t, &c, a[3:])
	if len(res) != 1 {
		t.Fatalf("second call: %d results", len(res))
	}
	if !equalPackets(resegment(t, res), a[3:]) {
		t.Fatal("second call round trip")
	}
}

func TestRoundTripSegmentCoalesce(t *testing.T) {
	for _, tc := range []superCase{
		{"tcp4", buildTCP(tcpSpec{f: flowA4, id: 40, seq: 123, ack: 9, flags: tcpACK | tcpPSH, opts: tcpOpts, payload: pattern(0, 60000)}), GSOTCPv4, 1448},
		{"tcp6", buildTCP(tcpSpec{f: flowA6, seq: 0xffffff00, ack: 9, flags: tcpACK, payload: pattern(0, 30000)}), GSOTCPv6, 1440},
		{"udp4", buildUDP(udpSpec{f: flowA4, id: 65530, payload: pattern(0, 40*1200+5)}), GSOUDPL4, 1200},
		{"udp6", buildUDP(udpSpec{f: flowA6, payload: pattern(0, 20*1232)}), GSOUDPL4, 1232},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr, super := toSuper(tc.pkt, tc.gso, tc.mss)
			res := coalesceN(t, segmentAll(t, hdr, super, 64, 1500), 1)
			if res[0].hdr != hdr {
				t.Fatalf("header %+v, want %+v", res[0].hdr, hdr)
			}
			if !bytes.Equal(res[0].pkt, super) {
				t.Fatal("Coalesce(Segment(x)) != x")
			}
		})
	}
}

func TestNoAllocations(t *testing.T) {
	hdr, super := toSuper(buildTCP(tcpSpec{f: flowA4, seq: 1, flags: tcpACK, opts: tcpOpts, payload: pattern(0, 65000)}), GSOTCPv4, 1448)
	segs, sizes := bufs(64, 1500), make([]int, 64)
	var n int
	if a := testing.AllocsPerRun(20, func() { n, _ = Segment(hdr, super, segs, sizes) }); a != 0 {
		t.Fatalf("Segment: %v allocations", a)
	}
	wire := make([][]byte, n)
	for i := range n {
		wire[i] = segs[i][:sizes[i]]
	}
	var c Coalescer
	arena, out := make([]byte, arenaSize(wire)), make([][]byte, n)
	if a := testing.AllocsPerRun(20, func() { _, _ = c.Coalesce(wire, arena, out) }); a != 0 {
		t.Fatalf("Coalesce: %v allocations", a)
	}
	p := buildUDP(udpSpec{f: flowA4, payload: pattern(0, 1000)})
	if a := testing.AllocsPerRun(20, func() { _ = Checksum(VirtioNetHdr{Flags: FlagNeedsCsum, CsumStart: 20, CsumOffset: 6}, p) }); a != 0 {
		t.Fatalf("Checksum: %v allocations", a)
	}
}
