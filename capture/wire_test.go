package capture

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/forward"
)

const ms = emu.Time(1e6)

var (
	clientIP = [4]byte{10, 9, 1, 2}
	serverIP = [4]byte{10, 9, 2, 2}
)

// tcpPkt builds an IPv4 TCP packet (headers and the first payload byte)
// of payload bytes from the client (up) or the server.
func tcpPkt(up bool, seq uint32, payload int, first byte) forward.Record {
	b := make([]byte, 20+20+1)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(40+payload))
	b[9] = 6
	src, dst, sp, dp := clientIP, serverIP, uint16(40000), uint16(4433)
	if !up {
		src, dst, sp, dp = dst, src, dp, sp
	}
	copy(b[12:], src[:])
	copy(b[16:], dst[:])
	binary.BigEndian.PutUint16(b[20:], sp)
	binary.BigEndian.PutUint16(b[22:], dp)
	binary.BigEndian.PutUint32(b[24:], seq)
	b[32] = 5 << 4
	b[40] = first
	n := 41
	if payload == 0 {
		n = 40
	}
	return forward.Record{Kind: forward.KindLink, Verdict: pipeline.Delivered, Len: uint32(40 + payload), Data: b[:n]}
}

// udpPkt builds an IPv4 UDP datagram whose payload starts with first.
func udpPkt(up bool, payload int, first byte) forward.Record {
	b := make([]byte, 20+8+1)
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(28+payload))
	b[9] = 17
	src, dst, sp, dp := clientIP, serverIP, uint16(50000), uint16(4433)
	if !up {
		src, dst, sp, dp = dst, src, dp, sp
	}
	copy(b[12:], src[:])
	copy(b[16:], dst[:])
	binary.BigEndian.PutUint16(b[20:], sp)
	binary.BigEndian.PutUint16(b[22:], dp)
	binary.BigEndian.PutUint16(b[24:], uint16(8+payload))
	b[28] = first
	return forward.Record{Kind: forward.KindLink, Verdict: pipeline.Delivered, Len: uint32(28 + payload), Data: b}
}

// at sets a record's entry and exit times (ms).
func at(r forward.Record, in, out float64) forward.Record {
	r.In, r.At = emu.Time(in*float64(ms)), emu.Time(out*float64(ms))
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestWireTLSOverTCP: a TLS 1.3 download over a 10 ms one-way link. The
// response is the server's first data after the client's second flight;
// the handshake's bytes, a retransmission, small segments and pure ACKs
// do not count; a dropped segment does not count.
func TestWireTLSOverTCP(t *testing.T) {
	wt := NewWireTimer(4433)
	recs := []struct {
		dir int
		r   forward.Record
	}{
		{IfaceUp, at(tcpPkt(true, 0, 0, 0), 0, 10)},             // SYN
		{IfaceDown, at(tcpPkt(false, 0, 0, 0), 10, 20)},         // SYN-ACK
		{IfaceUp, at(tcpPkt(true, 1, 300, 0x16), 20, 30)},       // ClientHello
		{IfaceDown, at(tcpPkt(false, 1, 1400, 0x16), 30, 40)},   // ServerHello...
		{IfaceDown, at(tcpPkt(false, 1401, 800, 0x17), 30, 40)}, // ...Finished
		{IfaceUp, at(tcpPkt(true, 301, 0, 0), 40, 50)},          // ACK
		{IfaceUp, at(tcpPkt(true, 301, 120, 0x17), 41, 51)},     // Finished + request
		{IfaceDown, at(tcpPkt(false, 2201, 1400, 0x17), 52, 62)},
		{IfaceDown, at(tcpPkt(false, 3601, 1400, 0x17), 53, 63)},
		{IfaceDown, at(tcpPkt(false, 2201, 1400, 0x17), 60, 70)}, // retransmission
		{IfaceDown, at(tcpPkt(false, 5001, 1000, 0x17), 61, 71)},
		{IfaceDown, at(tcpPkt(false, 6001, 24, 0x15), 90, 100)}, // close_notify: too small
	}
	dropped := at(tcpPkt(false, 7000, 1400, 0x17), 64, 64)
	dropped.Verdict = pipeline.DroppedLoss
	for _, x := range recs {
		x := x
		wt.Add(x.dir, &x.r)
	}
	wt.Add(IfaceDown, &dropped)
	w := wt.Result()
	ttfb, ok := w.TTFB()
	if !ok || !near(ttfb, 62) {
		t.Fatalf("TTFB %v %v, want 62 ms", ttfb, ok)
	}
	if w.PayloadBytes != 3800 || w.DataPackets != 4 || w.LastData != 71*ms || w.Flows != 1 {
		t.Fatalf("timing %+v: want 3800 bytes in 4 packets, last at 71 ms", w)
	}
	gp, ok := w.Goodput()
	if want := 3800 * 8 / 0.009 / 1e6; !ok || !near(gp, want) {
		t.Fatalf("goodput %v, want %v", gp, want)
	}
	m := w.Metrics()
	if !near(m["wire_ttfb_ms"], 62) || !near(m["wire_transfer_ms"], 9) || m["wire_payload_bytes"] != 3800 {
		t.Fatalf("metrics %v", m)
	}
	if g, _ := w.GoodputOf(9000); !near(g, 9000*8/0.009/1e6) {
		t.Fatalf("GoodputOf %v", g)
	}
}

// TestWireCleartextAndOtherPorts: without TLS the response follows the
// client's first payload; flows to other ports (competing traffic) are
// not the sample's.
func TestWireCleartextAndOtherPorts(t *testing.T) {
	wt := NewWireTimer(4433)
	other := at(tcpPkt(true, 0, 0, 0), 0, 1)
	binary.BigEndian.PutUint16(other.Data[22:], 5201)
	wt.Add(IfaceUp, &other)
	for _, x := range []struct {
		dir int
		r   forward.Record
	}{
		{IfaceUp, at(tcpPkt(true, 0, 0, 0), 5, 15)},
		{IfaceDown, at(tcpPkt(false, 0, 0, 0), 15, 25)},
		{IfaceUp, at(tcpPkt(true, 1, 80, 'G'), 25, 35)},
		{IfaceDown, at(tcpPkt(false, 1, 500, 'H'), 36, 46)},
	} {
		wt.Add(x.dir, &x.r)
	}
	w := wt.Result()
	if ttfb, ok := w.TTFB(); !ok || !near(ttfb, 41) || w.Flows != 1 {
		t.Fatalf("TTFB %v (%+v), want 41 ms from the sample's flow", ttfb, w)
	}
	if _, ok := w.Goodput(); ok {
		t.Fatal("goodput of a one-packet response")
	}
	if _, ok := w.Metrics()["wire_goodput_mbps"]; ok {
		t.Fatal("wire_goodput_mbps of a one-packet response")
	}
}

// TestWireQUIC: the first 1-RTT data packet is the response; long-header
// packets and small 1-RTT packets (acknowledgements) are not data.
func TestWireQUIC(t *testing.T) {
	wt := NewWireTimer(4433)
	for _, x := range []struct {
		dir int
		r   forward.Record
	}{
		{IfaceUp, at(udpPkt(true, 1200, 0xc0), 0, 10)},     // Initial
		{IfaceDown, at(udpPkt(false, 1200, 0xc0), 11, 21)}, // Initial + Handshake
		{IfaceUp, at(udpPkt(true, 200, 0xe0), 21, 31)},     // Handshake + 1-RTT request
		{IfaceDown, at(udpPkt(false, 40, 0x40), 31, 41)},   // ACK only
		{IfaceDown, at(udpPkt(false, 1252, 0x41), 32, 42)},
		{IfaceDown, at(udpPkt(false, 1252, 0x41), 33, 43)},
		{IfaceDown, at(udpPkt(false, 35, 0x41), 50, 60)}, // ACK only
	} {
		wt.Add(x.dir, &x.r)
	}
	w := wt.Result()
	if ttfb, ok := w.TTFB(); !ok || !near(ttfb, 42) {
		t.Fatalf("TTFB %v %v, want 42", ttfb, ok)
	}
	if w.PayloadBytes != 2504 || w.LastData != 43*ms {
		t.Fatalf("timing %+v", w)
	}
}

// TestWireNoResponse: nothing answered: no metrics.
func TestWireNoResponse(t *testing.T) {
	wt := NewWireTimer()
	r := at(tcpPkt(true, 0, 0, 0), 0, 10)
	wt.Add(IfaceUp, &r)
	short := forward.Record{Kind: forward.KindLink, Data: []byte{0x45}, Len: 20}
	wt.Add(IfaceUp, &short)
	if w := wt.Result(); w.Valid || len(w.Metrics()) != 0 {
		t.Fatalf("timing %+v, metrics %v", w, w.Metrics())
	}
}
