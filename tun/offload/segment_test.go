package offload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// segmentAll segments the super-packet (hdr, super) with Segment into n
// buffers of size bytes, fails the test on an error, and returns the wire
// packets (each buffer cut to its segment's size).
func segmentAll(t *testing.T, hdr VirtioNetHdr, super []byte, n, size int) [][]byte {
	t.Helper()
	out, sizes := bufs(n, size), make([]int, n)
	n, err := Segment(hdr, super, out, sizes)
	if err != nil {
		t.Fatal(err)
	}
	wire := make([][]byte, n)
	for i := range n {
		wire[i] = out[i][:sizes[i]]
	}
	return wire
}

// segmentN segments a copy of orig, sent as a super-packet of GSO type gso
// and size mss, into 64 buffers of 1600 bytes, and fails unless that gives
// want segments, which it returns.
func segmentN(t *testing.T, orig []byte, gso uint8, mss, want int) [][]byte {
	t.Helper()
	hdr, super := toSuper(append([]byte(nil), orig...), gso, mss)
	segs := segmentAll(t, hdr, super, 64, 1600)
	if len(segs) != want {
		t.Fatalf("%d segments, want %d", len(segs), want)
	}
	return segs
}

func TestSegmentTCP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		f        flow
		gso      uint8
		flags    uint8
		payload  int
		mss      int
		wantSegs int
	}{
		{"v4 64KB", flowA4, GSOTCPv4, tcpACK | tcpPSH, 65535 - 20 - 32, 1448, 46},
		{"v4 exact multiple", flowA4, GSOTCPv4, tcpACK, 10 * 1448, 1448, 10},
		{"v4 FIN", flowA4, GSOTCPv4, tcpACK | tcpPSH | tcpFIN, 3000, 1448, 3},
		{"v4 ECN CWR", flowA4, GSOTCPv4 | GSOECN, tcpACK | tcpCWR | tcpECE, 5000, 1448, 4},
		{"v4 AccECN CWR", flowA4, GSOTCPv4 | GSOAccECN, tcpACK | tcpCWR, 5000, 1448, 4},
		{"v4 fits in one", flowA4, GSOTCPv4, tcpACK | tcpPSH, 1000, 1448, 1},
		{"v4 odd mss", flowA4, GSOTCPv4, tcpACK, 4001, 999, 5},
		{"v6 64KB", flowA6, GSOTCPv6, tcpACK | tcpPSH, 65535 - 32, 1428, 46},
		{"v6 ECN", flowA6, GSOTCPv6 | GSOECN, tcpACK | tcpCWR, 4000, 1428, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const seq0, id0 = 0xfffff000, 0xfffe // both wrap
			data := pattern(0, tc.payload)
			orig := buildTCP(tcpSpec{f: tc.f, id: id0, tos: 0x02, seq: seq0, ack: 99, flags: tc.flags, opts: tcpOpts, payload: data})
			segs := segmentN(t, orig, tc.gso, tc.mss, tc.wantSegs)
			n := len(segs)
			ipl := 20
			if tc.f.src.Is6() {
				ipl = 40
			}
			var got []byte
			for i, s := range segs {
				if err := verifyWire(s); err != nil {
					t.Fatalf("segment %d: %v", i, err)
				}
				pl := payloadOf(s)
				if i < n-1 && len(pl) != tc.mss {
					t.Fatalf("segment %d payload %d, want mss %d", i, len(pl), tc.mss)
				}
				got = append(got, pl...)
				th := s[ipl:]
				if seq := binary.BigEndian.Uint32(th[4:]); seq != seq0+uint32(i*tc.mss) {
					t.Fatalf("segment %d seq %#x", i, seq)
				}
				if ipl == 20 {
					if id := binary.BigEndian.Uint16(s[4:]); id != uint16(id0+i) {
						t.Fatalf("segment %d IPv4 ID %#x, want %#x", i, id, uint16(id0+i))
					}
				}
				wantFlags := tc.flags
				if i != n-1 {
					wantFlags &^= tcpFIN | tcpPSH
				}
				if i != 0 && tc.gso&GSOAccECN == 0 {
					wantFlags &^= tcpCWR
				}
				if th[13] != wantFlags {
					t.Fatalf("segment %d flags %#x, want %#x", i, th[13], wantFlags)
				}
				// Everything else in the headers is copied.
				if !bytes.Equal(th[0:4], orig[ipl:ipl+4]) || !bytes.Equal(th[8:13], orig[ipl+8:ipl+13]) || !bytes.Equal(th[14:16], orig[ipl+14:ipl+16]) || !bytes.Equal(th[18:32], orig[ipl+18:ipl+32]) {
					t.Fatalf("segment %d TCP header fields changed", i)
				}
				if s[1] != orig[1] || s[8-ipl/40] != orig[8-ipl/40] {
					t.Fatalf("segment %d TOS/TTL changed", i)
				}
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("reassembled payload differs (%d vs %d bytes)", len(got), len(data))
			}
			if n == 1 && !bytes.Equal(segs[0], orig) {
				t.Fatal("single segment differs from the checksummed original")
			}
		})
	}
}

func TestSegmentUDP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		f        flow
		payload  int
		mss      int
		wantSegs int
	}{
		{"v4", flowA4, 10*1200 + 7, 1200, 11},
		{"v4 exact", flowA4, 64 * 1000, 1000, 64},
		{"v6", flowA6, 5 * 1232, 1232, 5},
		{"v6 one", flowA6, 100, 1232, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := pattern(7, tc.payload)
			orig := buildUDP(udpSpec{f: tc.f, id: 500, payload: data})
			segs := segmentN(t, orig, GSOUDPL4, tc.mss, tc.wantSegs)
			for i, s := range segs {
				if err := verifyWire(s); err != nil {
					t.Fatalf("segment %d: %v", i, err)
				}
				want := data[i*tc.mss : min((i+1)*tc.mss, len(data))]
				if !bytes.Equal(payloadOf(s), want) {
					t.Fatalf("segment %d payload differs", i)
				}
				if tc.f.src.Is4() && binary.BigEndian.Uint16(s[4:]) != uint16(500+i) {
					t.Fatalf("segment %d IPv4 ID %d", i, binary.BigEndian.Uint16(s[4:]))
				}
			}
		})
	}
}

func TestSegmentUDPZeroChecksumSentAsFFFF(t *testing.T) {
	// Two 10-byte datagrams; choose the second's last payload bytes so that
	// its checksum computes to 0.
	data := make([]byte, 20)
	seg2 := buildUDP(udpSpec{f: flowA4, id: 2, payload: data[10:]})
	l4 := seg2[20:]
	binary.BigEndian.PutUint16(l4[6:], 0)
	binary.BigEndian.PutUint16(data[18:], ^refFold(refPseudo(seg2, 17, len(l4))+refSum(l4)))
	hdr, super := toSuper(buildUDP(udpSpec{f: flowA4, id: 1, payload: data}), GSOUDPL4, 10)
	out, sizes := bufs(2, 100), make([]int, 2)
	n, err := Segment(hdr, super, out, sizes)
	if err != nil || n != 2 {
		t.Fatalf("n %d err %v", n, err)
	}
	if c := binary.BigEndian.Uint16(out[1][26:]); c != 0xffff {
		t.Fatalf("checksum %#04x, want 0xffff", c)
	}
	if err := verifyWire(out[1][:sizes[1]]); err != nil {
		t.Fatal(err)
	}
}

func TestSegmentNoneCompletesChecksum(t *testing.T) {
	orig := buildTCP(tcpSpec{f: flowA6, seq: 5, flags: tcpACK, payload: pattern(0, 500)})
	hdr, p := toSuper(append([]byte(nil), orig...), GSONone, 0)
	out, sizes := bufs(1, 1500), make([]int, 1)
	n, err := Segment(hdr, p, out, sizes)
	if err != nil || n != 1 {
		t.Fatalf("n %d err %v", n, err)
	}
	if !bytes.Equal(out[0][:sizes[0]], orig) {
		t.Fatal("output differs from the checksummed packet")
	}
	// Without NEEDS_CSUM the packet is copied untouched.
	n, err = Segment(VirtioNetHdr{Flags: FlagDataValid}, p, out, sizes)
	if err != nil || n != 1 || !bytes.Equal(out[0][:sizes[0]], p) {
		t.Fatalf("DATA_VALID copy: n %d err %v", n, err)
	}
}

func TestSegmentErrors(t *testing.T) {
	good := func() (VirtioNetHdr, []byte) {
		return toSuper(buildTCP(tcpSpec{f: flowA4, seq: 1, flags: tcpACK, opts: tcpOpts, payload: pattern(0, 5000)}), GSOTCPv4, 1448)
	}
	goodUDP := func() (VirtioNetHdr, []byte) {
		return toSuper(buildUDP(udpSpec{f: flowA6, payload: pattern(0, 5000)}), GSOUDPL4, 1200)
	}
	for _, tc := range []struct {
		name   string
		mutate func(h *VirtioNetHdr, p []byte) []byte
		udp    bool
		nout   int
		outLen int
		want   error
		msg    string
	}{
		{name: "gso size 0", mutate: func(h *VirtioNetHdr, p []byte) []byte { h.GSOSize = 0; return p }, want: ErrMalformed, msg: "gso_size is 0"},
		{name: "unknown gso type", mutate: func(h *VirtioNetHdr, p []byte) []byte { h.GSOType = 9; return p }, want: ErrMalformed, msg: "unknown gso_type"},
		{name: "UFO", mutate: func(h *VirtioNetHdr, p []byte) []byte { h.GSOType = GSOUDP; return p }, want: ErrMalformed, msg: "UFO"},
		{name: "ECN on UDP", udp: true, mutate: func(h *VirtioNetHdr, p []byte) []byte { h.GSOType |= GSOECN; return p }, want: ErrMalformed, msg: "ECN"},
		{name: "TCPv6 type on IPv4", mutate: func(h *VirtioNetHdr, p []byte) []byte { h.GSOType = GSOTCPv6; return p }, want: ErrMalformed, msg: "needs an IPv6 packet"},
		{name: "empty", mutate: func(h *VirtioNetHdr, p []byte) []byte { return nil }, want: ErrMalformed, msg: "empty"},
		{name: "truncated IPv4", mutate: func(h *VirtioNetHdr, p []byte) []byte { return p[:19] }, want: ErrMalformed, msg: "shorter than its 20-byte header"},
		{name: "IHL too small", mutate: func(h *VirtioNetHdr, p []byte) []byte { p[0] = 0x44; return p }, want: ErrMalformed, msg: "header length (IHL)"},
		{name: "total length mismatch", mutate: func(h *VirtioNetHdr, p []byte) []byte { return p[:len(p)-1] }, want: ErrMalformed, msg: "total length"},
		{name: "fragment", mutate: func(h *VirtioNetHdr, p []byte) []byte { p[6] |= 0x20; return p }, want: ErrMalformed, msg: "fragment"},
		{name: "protocol mismatch", mutate: func(h *VirtioNetHdr, p []byte) []byte { p[9] = 17; return p }, want: ErrMalformed, msg: "IPv4 protocol does not match"},
		{name: "data offset too small", mutate: func(h *VirtioNetHdr, p []byte) []byte { p[32] = 0x40; return p }, want: ErrMalformed, msg: "TCP data offset"},
		{name: "data offset beyond packet", mutate: func(h *VirtioNetHdr, p []byte) []byte {
			p[32] = 0xf0
			p = p[:20+40]
			binary.BigEndian.PutUint16(p[2:], 60)
			return p
		}, want: ErrMalformed, msg: "TCP data offset"},
		{name: "csum_start wrong", mutate: func(h *VirtioNetHdr, p []byte) []byte { h.CsumStart = 14; return p }, want: ErrMalformed, msg: "csum_start / csum_offset"},
		{name: "csum_offset wrong", mutate: func(h *VirtioNetHdr, p []byte) []byte { h.CsumOffset = 6; return p }, want: ErrMalformed, msg: "csum_start / csum_offset"},
		{name: "IPv6 payload length", udp: true, mutate: func(h *VirtioNetHdr, p []byte) []byte { p[5]++; return p }, want: ErrMalformed, msg: "payload length"},
		{name: "IPv6 extension header", udp: true, mutate: func(h *VirtioNetHdr, p []byte) []byte { p[6] = 0; return p }, want: ErrMalformed, msg: "extension headers"},
		{name: "UDP length", udp: true, mutate: func(h *VirtioNetHdr, p []byte) []byte { p[45]++; return p }, want: ErrMalformed, msg: "UDP length"},
		{name: "UDP truncated", udp: true, mutate: func(h *VirtioNetHdr, p []byte) []byte {
			p = p[:44]
			binary.BigEndian.PutUint16(p[4:], 4)
			return p
		}, want: ErrMalformed, msg: "UDP header truncated"},
		{name: "IP version 5", mutate: func(h *VirtioNetHdr, p []byte) []byte { h.GSOType = GSOUDPL4; p[0] = 0x55; return p }, want: ErrMalformed, msg: "IP version is neither 4 nor 6"},
		{name: "too few buffers", nout: 3, want: ErrShortBuffer, msg: "fewer output buffers"},
		{name: "buffers too small", outLen: 1000, want: ErrShortBuffer, msg: "output buffer is shorter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, p := good()
			if tc.udp {
				h, p = goodUDP()
			}
			if tc.mutate != nil {
				p = tc.mutate(&h, p)
			}
			nout, outLen := 8, 2000
			if tc.nout > 0 {
				nout = tc.nout
			}
			if tc.outLen > 0 {
				outLen = tc.outLen
			}
			n, err := Segment(h, p, bufs(nout, outLen), make([]int, nout))
			if !errors.Is(err, tc.want) || n != 0 {
				t.Fatalf("n %d, err %v; want %v", n, err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not mention %q", err, tc.msg)
			}
		})
	}
}

// TestSegmentFromBatches: a 64 KB TSO super-packet with a 300-byte MSS has
// 217 segments, more than a forwarder's batch of buffers. Segmenting it with
// SegmentFrom in batches of any size yields exactly Segment's packets.
func TestSegmentFromBatches(t *testing.T) {
	for _, tc := range []superCase{
		{"tcp4 mss 300", buildTCP(tcpSpec{f: flowA4, id: 65500, seq: 0xfffff000, ack: 9, flags: tcpACK | tcpPSH | tcpFIN | tcpCWR, opts: tcpOpts, payload: pattern(0, 65000)}), GSOTCPv4, 300},
		{"tcp6 mss 200", buildTCP(tcpSpec{f: flowA6, seq: 7, ack: 9, flags: tcpACK | tcpPSH, payload: pattern(0, 60000)}), GSOTCPv6, 200},
		{"udp4 mss 256", buildUDP(udpSpec{f: flowA4, id: 3, payload: pattern(0, 64000)}), GSOUDPL4, 256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr, super := toSuper(tc.pkt, tc.gso, tc.mss)
			all := segmentAll(t, hdr, super, 400, 1500)
			want := len(all)
			if want <= 128 {
				t.Fatalf("%d segments: the test needs more than 128", want)
			}
			for i, s := range all {
				if err := verifyWire(s); err != nil {
					t.Fatalf("segment %d: %v", i, err)
				}
			}
			// Segment refuses to do part of the job.
			many, manySizes := bufs(want, 1500), make([]int, want)
			if n, err := Segment(hdr, super, many[:128], manySizes[:128]); n != 0 || !errors.Is(err, ErrShortBuffer) {
				t.Fatalf("Segment with 128 buffers: %d, %v; want ErrShortBuffer", n, err)
			}
			for _, batch := range []int{128, 7, 1} {
				out, sizes := bufs(batch, 1500), make([]int, batch)
				first := 0
				for first < want {
					n, total, err := SegmentFrom(hdr, super, first, out, sizes)
					if err != nil || total != want || n != min(batch, want-first) {
						t.Fatalf("batch %d from %d: n %d, total %d, %v; want %d of %d", batch, first, n, total, err, min(batch, want-first), want)
					}
					for j := range n {
						if !bytes.Equal(out[j][:sizes[j]], all[first+j]) {
							t.Fatalf("batch %d: segment %d differs from Segment's", batch, first+j)
						}
					}
					first += n
				}
			}
			// No buffers: validation and the count only.
			if n, total, err := SegmentFrom(hdr, super, 0, nil, nil); n != 0 || total != want || err != nil {
				t.Fatalf("SegmentFrom without buffers: %d, %d, %v; want 0, %d, nil", n, total, err, want)
			}
			if n, total, err := SegmentFrom(hdr, super, want, many, manySizes); n != 0 || total != want || err != nil {
				t.Fatalf("SegmentFrom past the end: %d, %d, %v", n, total, err)
			}
			if _, _, err := SegmentFrom(hdr, super, want+1, many, manySizes); !errors.Is(err, ErrShortBuffer) {
				t.Fatalf("SegmentFrom beyond the end: %v", err)
			}
		})
	}
	// GSONone: one packet.
	p := buildUDP(udpSpec{f: flowA4, payload: pattern(0, 100)})
	out, sizes := bufs(2, 1500), make([]int, 2)
	if n, total, err := SegmentFrom(VirtioNetHdr{}, p, 0, out, sizes); n != 1 || total != 1 || err != nil || !bytes.Equal(out[0][:sizes[0]], p) {
		t.Fatalf("GSONone: %d, %d, %v", n, total, err)
	}
}

// TestErrorsDoNotAllocate: the hot path's error returns are preallocated,
// so a flood of malformed reads makes no garbage.
func TestErrorsDoNotAllocate(t *testing.T) {
	hdr, super := toSuper(buildTCP(tcpSpec{f: flowA4, seq: 1, flags: tcpACK, payload: pattern(0, 5000)}), GSOTCPv4, 1448)
	bad := append([]byte(nil), super...)
	bad[9] = protoUDP // protocol mismatch
	segs, sizes := bufs(8, 1500), make([]int, 8)
	var v VirtioNetHdr
	for name, f := range map[string]func() error{
		"malformed":   func() error { _, err := Segment(hdr, bad, segs, sizes); return err },
		"few buffers": func() error { _, err := Segment(hdr, super, segs[:2], sizes[:2]); return err },
		"small":       func() error { _, err := Segment(hdr, super, bufs(8, 100), sizes); return err },
		"from":        func() error { _, _, err := SegmentFrom(hdr, super, 9, segs, sizes); return err },
		"gso type":    func() error { _, err := Segment(VirtioNetHdr{GSOType: 9, GSOSize: 1}, super, segs, sizes); return err },
		"checksum":    func() error { return Checksum(hdr, super) },
		"decode":      func() error { return v.Decode(super[:3]) },
		"encode":      func() error { return v.Encode(super[:3]) },
	} {
		if f() == nil {
			t.Fatalf("%s: no error", name)
		}
		if name == "small" {
			continue // bufs allocates; checked below
		}
		if a := testing.AllocsPerRun(50, func() { _ = f() }); a != 0 {
			t.Errorf("%s: %v allocations per error", name, a)
		}
	}
	small := bufs(8, 100)
	if a := testing.AllocsPerRun(50, func() { _, _ = Segment(hdr, super, small, sizes) }); a != 0 {
		t.Errorf("small buffers: %v allocations per error", a)
	}
}
