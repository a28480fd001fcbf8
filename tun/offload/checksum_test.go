package offload

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

func TestSumMatchesRFC1071(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 300; n++ {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if n%7 == 0 {
			for i := range b {
				b[i] = 0xff // worst case for carries
			}
		}
		got := fold(sum(b, 0))
		// little-endian domain -> big-endian value
		got = got<<8 | got>>8
		if want := refFold(refSum(b)); got != want && !(got == 0xffff && want == 0) && !(got == 0 && want == 0xffff) {
			t.Fatalf("len %d: sum %#04x, RFC 1071 %#04x", n, got, want)
		}
	}
}

func TestSumSplitAtEvenOffsets(t *testing.T) {
	b := pattern(3, 1001)
	whole := fold(sum(b, 0))
	for cut := 0; cut <= len(b); cut += 2 {
		if got := fold(sum(b[cut:], sum(b[:cut], 0))); got != whole {
			t.Fatalf("cut %d: %#04x, whole %#04x", cut, got, whole)
		}
	}
}

func TestChecksumCompletesPartial(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkt  []byte
	}{
		{"tcp4", buildTCP(tcpSpec{f: flowA4, seq: 1, flags: tcpACK | tcpPSH, opts: tcpOpts, payload: pattern(0, 333)})},
		{"tcp6", buildTCP(tcpSpec{f: flowA6, seq: 1, flags: tcpACK, payload: pattern(5, 1000)})},
		{"udp4", buildUDP(udpSpec{f: flowA4, payload: pattern(1, 77)})},
		{"udp6", buildUDP(udpSpec{f: flowA6, payload: pattern(2, 1200)})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := append([]byte(nil), tc.pkt...)
			hdr, p := toSuper(tc.pkt, GSONone, 0)
			if verifyWire(p) == nil {
				t.Fatal("partial checksum verifies before completion; test is vacuous")
			}
			if err := Checksum(hdr, p); err != nil {
				t.Fatal(err)
			}
			if err := verifyWire(p); err != nil {
				t.Fatal(err)
			}
			if string(p) != string(want) {
				t.Fatalf("completed packet differs from the reference")
			}
		})
	}
}

func TestChecksumZeroBecomesFFFF(t *testing.T) {
	// Craft a UDP datagram whose checksum computes to 0: the last two payload
	// bytes cancel the rest of the sum.
	p := buildUDP(udpSpec{f: flowA4, payload: make([]byte, 10)})
	l4 := p[20:]
	binary.BigEndian.PutUint16(l4[6:], 0)
	binary.BigEndian.PutUint16(l4[16:], 0)
	s := refFold(refPseudo(p, 17, len(l4)) + refSum(l4))
	binary.BigEndian.PutUint16(l4[16:], ^s)
	if refFold(refPseudo(p, 17, len(l4))+refSum(l4)) != 0xffff {
		t.Fatal("setup: crafted datagram does not sum to 0xffff")
	}
	binary.BigEndian.PutUint16(l4[6:], refFold(refPseudo(p, 17, len(l4))))
	hdr := VirtioNetHdr{Flags: FlagNeedsCsum, CsumStart: 20, CsumOffset: 6}
	if err := Checksum(hdr, p); err != nil {
		t.Fatal(err)
	}
	if c := binary.BigEndian.Uint16(l4[6:]); c != 0xffff {
		t.Fatalf("checksum %#04x, want 0xffff", c)
	}
	if err := verifyWire(p); err != nil {
		t.Fatal(err)
	}
}

func TestChecksumErrors(t *testing.T) {
	p := buildUDP(udpSpec{f: flowA4, payload: pattern(0, 10)})
	if err := Checksum(VirtioNetHdr{Flags: FlagNeedsCsum, CsumStart: 20, CsumOffset: uint16(len(p))}, p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("offset beyond packet: err = %v", err)
	}
	if err := Checksum(VirtioNetHdr{GSOType: GSOTCPv4, GSOSize: 100}, p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("GSO packet: err = %v", err)
	}
	orig := append([]byte(nil), p...)
	if err := Checksum(VirtioNetHdr{Flags: FlagDataValid}, p); err != nil || string(p) != string(orig) {
		t.Fatalf("no NEEDS_CSUM: err %v, changed %v", err, string(p) != string(orig))
	}
}

func TestVirtioNetHdrRoundTrip(t *testing.T) {
	h := VirtioNetHdr{Flags: FlagNeedsCsum, GSOType: GSOTCPv6 | GSOECN, HdrLen: 0x1234, GSOSize: 1448, CsumStart: 40, CsumOffset: 16}
	b := make([]byte, VirtioNetHdrLen)
	if err := h.Encode(b); err != nil {
		t.Fatal(err)
	}
	if b[0] != FlagNeedsCsum || b[1] != GSOTCPv6|GSOECN || binary.NativeEndian.Uint16(b[4:]) != 1448 {
		t.Fatalf("layout: % x", b)
	}
	var g VirtioNetHdr
	if err := g.Decode(b); err != nil || g != h {
		t.Fatalf("decode: %+v, %v", g, err)
	}
	if err := g.Decode(b[:9]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short decode: %v", err)
	}
	if err := h.Encode(b[:9]); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("short encode: %v", err)
	}
}
