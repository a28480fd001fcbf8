package capture

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/forward"
)

// Wire timing: what a sample's packets show of its transfer, whatever the
// endpoints report, computed from the tap's records (headers only are
// enough). A flow is one TCP connection or one UDP 4-tuple between the
// client and one of the sample's server ports.
//
//   - The client's first packet: the earliest packet of a flow the client
//     sent, at the time it entered the emulator (the client's send time),
//     whatever became of it.
//   - A data packet is a server -> client packet delivered to the client
//     whose transport payload (TCP payload; UDP payload of a datagram
//     starting with a QUIC short-header packet, i.e. a 1-RTT packet) is at
//     least MinDataBytes: pure acknowledgements, TLS alerts and small
//     control frames do not count.
//   - The response starts with the first data packet that answers the
//     request: TCP with TLS (the client's first payload byte is a TLS
//     handshake record, 0x16): the first data packet the server sent after
//     the client's second flight reached it (the client's first segment
//     with payload sent after the server's first data arrived: its
//     Finished, with the request); TCP without TLS: after the client's
//     first segment with payload reached the server; QUIC: the first data
//     packet (the server sends 1-RTT packets once the handshake is
//     complete, when the request arrives with the client's Finished).
//   - TTFB on the wire: from the client's first packet to the arrival at
//     the client of the first response's first data packet, over all
//     flows (the handshake included, like endpoint's `first_byte -
//     conn.start`).
//   - Goodput on the wire: payload bytes of the data packets from each
//     response's first on (TCP: bytes of new sequence space only, so
//     retransmissions do not count; QUIC: the UDP payload, with QUIC's
//     headers, frames and any retransmitted frames), times 8, over the time
//     from the first response data packet's arrival to the last data
//     packet's, as the quic-interop-runner computes goodput from its
//     capture of 1-RTT packets.

// MinDataBytes is the least transport payload of a data packet.
const MinDataBytes = 64

// WireTiming is a sample's timing as its packets show it. Times are on
// the forwarder's clock; Valid is false when no response was seen (no
// flow to a server port, or no data packet answering a request).
type WireTiming struct {
	Valid bool
	// FirstClient: the client's first packet entered the emulator.
	// FirstData: the first response data packet reached the client.
	// LastData: the last data packet reached the client.
	FirstClient, FirstData, LastData emu.Time
	PayloadBytes                     uint64 // payload of the data packets counted for goodput
	DataPackets                      uint64
	Flows                            int
}

// TTFB returns the wire TTFB.
func (w WireTiming) TTFB() (ms float64, ok bool) {
	if !w.Valid {
		return 0, false
	}
	return float64(w.FirstData-w.FirstClient) / 1e6, true
}

// Goodput returns the wire goodput in Mbit/s; not ok when the data packets
// arrived at one instant (a one-packet response).
func (w WireTiming) Goodput() (mbps float64, ok bool) {
	d := w.LastData - w.FirstData
	if !w.Valid || d <= 0 {
		return 0, false
	}
	return float64(w.PayloadBytes) * 8 / (float64(d) / 1e9) / 1e6, true
}

// GoodputOf returns the goodput of a transfer of bytes (for instance a
// response body of known size, as the interop runner counts it) over the
// wire's transfer time.
func (w WireTiming) GoodputOf(bytes int64) (mbps float64, ok bool) {
	d := w.LastData - w.FirstData
	if !w.Valid || d <= 0 || bytes <= 0 {
		return 0, false
	}
	return float64(bytes) * 8 / (float64(d) / 1e9) / 1e6, true
}

// Metrics returns the wire metrics for a sample: wire_ttfb_ms,
// wire_goodput_mbps, wire_transfer_ms and wire_payload_bytes, each only
// when it can be computed (docs/metrics.md).
func (w WireTiming) Metrics() map[string]float64 {
	m := map[string]float64{}
	if v, ok := w.TTFB(); ok {
		m["wire_ttfb_ms"] = v
		m["wire_payload_bytes"] = float64(w.PayloadBytes)
	}
	if v, ok := w.Goodput(); ok {
		m["wire_goodput_mbps"] = v
		m["wire_transfer_ms"] = float64(w.LastData-w.FirstData) / 1e6
	}
	return m
}

// flowKey is a flow's client and server address, ports and protocol.
type flowKey struct {
	client, server [16]byte
	cport, sport   uint16
	proto          uint8
}

// flow is one flow's progress through the state machine above.
type flow struct {
	first        emu.Time // the client's first packet entered
	started      bool
	tls          bool     // TCP: the client's first payload is a TLS handshake record
	clientData   bool     // the client sent payload
	serverData   emu.Time // the server's first payload reached the client (0: not yet)
	request      emu.Time // the request reached the server (0: not yet)
	response     emu.Time // the response's first data packet reached the client (0: not yet)
	last         emu.Time
	bytes, pkts  uint64
	seqMax       uint32 // TCP: end of the server's sequence space seen
	seqSet       bool
	seenServer   bool
	seenRequest  bool
	seenResponse bool
}

// WireTimer computes WireTiming from a sample's records, given in the
// order of their At times (as a Session gives them). It allocates only
// per flow.
type WireTimer struct {
	ports []uint16
	flows map[flowKey]*flow
}

// NewWireTimer returns a timer counting the flows to these server ports
// (any port when none is given).
func NewWireTimer(serverPorts ...uint16) *WireTimer {
	return &WireTimer{ports: slices.Clone(serverPorts), flows: map[flowKey]*flow{}}
}

// packetInfo is what the timer reads from a wire packet's headers.
type packetInfo struct {
	src, dst         [16]byte
	sport, dport     uint16
	proto            uint8
	payload          int    // transport payload bytes (of the original packet)
	first            byte   // first payload byte, when captured
	hasFirst         bool   // the first payload byte was captured
	seq              uint32 // TCP
	shortHeaderQUIC  bool
	ok               bool
	payloadInCapture int // offset of the payload in the captured bytes
}

// parse reads the IP and transport headers of a packet of origLen bytes
// whose first bytes are b.
func parse(b []byte, origLen int) (pi packetInfo) {
	if len(b) < 1 {
		return
	}
	var l4 int
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl || binary.BigEndian.Uint16(b[6:])&0x1fff != 0 {
			return // short, or a later fragment
		}
		pi.proto = b[9]
		copy(pi.src[:4], b[12:16])
		copy(pi.dst[:4], b[16:20])
		origLen = min(origLen, int(binary.BigEndian.Uint16(b[2:])))
		l4 = ihl
	case 6:
		if len(b) < 40 {
			return
		}
		pi.proto = b[6]
		copy(pi.src[:], b[8:24])
		copy(pi.dst[:], b[24:40])
		origLen = min(origLen, 40+int(binary.BigEndian.Uint16(b[4:])))
		l4 = 40
	default:
		return
	}
	switch pi.proto {
	case 6: // TCP
		if len(b) < l4+20 {
			return
		}
		doff := int(b[l4+12]>>4) * 4
		if doff < 20 {
			return
		}
		pi.sport, pi.dport = binary.BigEndian.Uint16(b[l4:]), binary.BigEndian.Uint16(b[l4+2:])
		pi.seq = binary.BigEndian.Uint32(b[l4+4:])
		pi.payloadInCapture = l4 + doff
		pi.payload = origLen - l4 - doff
	case 17: // UDP
		if len(b) < l4+8 {
			return
		}
		pi.sport, pi.dport = binary.BigEndian.Uint16(b[l4:]), binary.BigEndian.Uint16(b[l4+2:])
		pi.payloadInCapture = l4 + 8
		pi.payload = origLen - l4 - 8
	default:
		return
	}
	if pi.payload < 0 {
		return
	}
	if pi.payload > 0 && len(b) > pi.payloadInCapture {
		pi.first, pi.hasFirst = b[pi.payloadInCapture], true
		pi.shortHeaderQUIC = pi.proto == 17 && pi.first&0x80 == 0 && pi.first&0x40 != 0
	}
	pi.ok = true
	return
}

// Add takes one record of direction dir (IfaceUp, IfaceDown).
func (wt *WireTimer) Add(dir int, r *forward.Record) {
	if r.Kind != forward.KindLink {
		return
	}
	pi := parse(r.Data, int(r.Len))
	if !pi.ok {
		return
	}
	var k flowKey
	if dir == IfaceUp {
		k = flowKey{client: pi.src, server: pi.dst, cport: pi.sport, sport: pi.dport, proto: pi.proto}
	} else {
		k = flowKey{client: pi.dst, server: pi.src, cport: pi.dport, sport: pi.sport, proto: pi.proto}
	}
	if len(wt.ports) > 0 && !slices.Contains(wt.ports, k.sport) {
		return
	}
	f := wt.flows[k]
	if f == nil {
		if dir != IfaceUp {
			return // a flow starts with the client's packet
		}
		f = &flow{}
		wt.flows[k] = f
	}
	delivered := r.Verdict == pipeline.Delivered
	if dir == IfaceUp {
		if !f.started || r.In < f.first {
			f.first, f.started = r.In, true
		}
		if pi.payload == 0 || !delivered {
			return
		}
		if !f.clientData {
			f.clientData = true
			f.tls = pi.proto == 6 && pi.hasFirst && pi.first == 0x16
		}
		if f.seenRequest || pi.proto != 6 {
			return
		}
		if !f.tls || f.seenServer && r.In >= f.serverData {
			f.request, f.seenRequest = r.At, true
		}
		return
	}
	// Server -> client.
	if !delivered || pi.payload == 0 {
		return
	}
	if !f.seenServer {
		f.serverData, f.seenServer = r.At, true
	}
	n := uint64(pi.payload)
	if pi.proto == 6 {
		end := pi.seq + uint32(pi.payload)
		switch {
		case !f.seqSet:
			f.seqMax, f.seqSet = end, true
		case int32(end-f.seqMax) > 0:
			n = uint64(min(end-f.seqMax, uint32(pi.payload)))
			f.seqMax = end
		default:
			n = 0 // retransmitted bytes
		}
	}
	if pi.payload < MinDataBytes || pi.proto == 17 && !pi.shortHeaderQUIC {
		return
	}
	if !f.seenResponse {
		if pi.proto == 6 && (!f.seenRequest || r.In < f.request) {
			return
		}
		f.response, f.seenResponse = r.At, true
	}
	f.bytes += n
	f.pkts++
	f.last = r.At
}

// Result returns the timing of the records added so far.
func (wt *WireTimer) Result() WireTiming {
	var w WireTiming
	first := emu.Time(math.MaxInt64)
	for _, f := range wt.flows {
		if !f.started {
			continue
		}
		w.Flows++
		first = min(first, f.first)
		if !f.seenResponse {
			continue
		}
		if !w.Valid || f.response < w.FirstData {
			w.FirstData = f.response
		}
		if !w.Valid || f.last > w.LastData {
			w.LastData = f.last
		}
		w.Valid = true
		w.PayloadBytes += f.bytes
		w.DataPackets += f.pkts
	}
	if w.Valid {
		w.FirstClient = first
	}
	return w
}
