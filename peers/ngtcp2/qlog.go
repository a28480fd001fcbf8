package ngtcp2

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"

	"github.com/quicbench/quicbench/model"
)

// trace is what one ngtcp2 qlog (qlog 0.3, JSON-SEQ: one record per line
// after an RS character) says of a connection. ngtcp2 0.12 stamps events
// in whole milliseconds from the connection's start (time_format
// "relative", reference_time 0), so every time here is in ms from the
// first event.
type trace struct {
	vantage string // "client" or "server"

	sent, lost int64 // packets
	lostBytes  int64
	firstTime  float64
	lastTime   float64
	handshake  float64 // HANDSHAKE_DONE received (client) or sent (server); 0 = not seen
	closed     bool    // a CONNECTION_CLOSE was sent or received

	// the last recovery:metrics_updated values
	srtt, minRTT, rttVar float64
	cwnd, inFlight       int64
	ptoCount             int64
	// cwnds is the congestion window over time (for the algorithm's
	// fingerprint: its reductions)
	cwnds []float64

	streams map[int64]*streamTrace
}

// streamTrace is one stream's STREAM frames.
type streamTrace struct {
	firstSent, firstRecv, fin float64 // ms; -1 = not seen
	recvBytes                 int64
	chunks                    [][2]float64 // receive time (ms), bytes
}

type qlogRecord struct {
	Time  *float64        `json:"time"`
	Name  string          `json:"name"`
	Data  json.RawMessage `json:"data"`
	Trace *struct {
		VantagePoint struct {
			Type string `json:"type"`
		} `json:"vantage_point"`
	} `json:"trace"`
}

type qlogFrame struct {
	Type     string `json:"frame_type"`
	StreamID *int64 `json:"stream_id"`
	Length   int64  `json:"length"`
	Fin      bool   `json:"fin"`
}

type qlogPacket struct {
	Frames []qlogFrame `json:"frames"`
	Raw    struct {
		Length int64 `json:"length"`
	} `json:"raw"`
}

type qlogMetrics struct {
	SmoothedRTT *float64 `json:"smoothed_rtt"`
	MinRTT      *float64 `json:"min_rtt"`
	RTTVariance *float64 `json:"rtt_variance"`
	Cwnd        *int64   `json:"congestion_window"`
	InFlight    *int64   `json:"bytes_in_flight"`
	PTOCount    *int64   `json:"pto_count"`
}

// maxRecord bounds one qlog record (a packet of many frames is a few KB).
const maxRecord = 4 << 20

// parseQlog reads one qlog of ngtcp2. A record it cannot read fails it,
// naming the record; a truncated last record (the program killed while it
// wrote) is ignored.
func parseQlog(r io.Reader) (*trace, error) {
	t := &trace{streams: map[int64]*streamTrace{}, firstTime: -1}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxRecord)
	sc.Split(splitRS)
	n := 0
	var pending error
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		n++
		if pending != nil {
			return nil, pending
		}
		var rec qlogRecord
		if err := json.Unmarshal(b, &rec); err != nil {
			// only the last record may be cut short
			pending = fmt.Errorf("qlog record %d: %v", n, err)
			continue
		}
		if rec.Trace != nil {
			t.vantage = rec.Trace.VantagePoint.Type
			continue
		}
		if rec.Time == nil {
			continue
		}
		if err := t.event(*rec.Time, rec.Name, rec.Data); err != nil {
			return nil, fmt.Errorf("qlog record %d (%s): %w", n, rec.Name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if t.vantage == "" {
		return nil, errors.New("qlog: no trace header (vantage point)")
	}
	if t.firstTime < 0 {
		return nil, errors.New("qlog: no events")
	}
	return t, nil
}

// splitRS splits JSON-SEQ: records start with the record separator (0x1E)
// and end with a newline; plain newline-separated records are read too.
func splitRS(data []byte, atEOF bool) (advance int, token []byte, err error) {
	for len(data) > 0 && (data[0] == 0x1e || data[0] == '\n' || data[0] == '\r') {
		data = data[1:]
		advance++
	}
	if i := bytes.IndexAny(data, "\x1e\n"); i >= 0 {
		return advance + i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return advance + len(data), data, nil
	}
	return advance, nil, nil
}

func (t *trace) event(at float64, name string, data json.RawMessage) error {
	if t.firstTime < 0 {
		t.firstTime = at
	}
	t.lastTime = math.Max(t.lastTime, at)
	switch name {
	case "transport:packet_sent", "transport:packet_received":
		var p qlogPacket
		if err := json.Unmarshal(data, &p); err != nil {
			return err
		}
		sent := name == "transport:packet_sent"
		if sent {
			t.sent++
		}
		for _, f := range p.Frames {
			switch f.Type {
			case "handshake_done":
				if t.handshake == 0 {
					t.handshake = at
				}
			case "connection_close":
				t.closed = true
			case "stream":
				if f.StreamID == nil {
					return errors.New("a STREAM frame without stream_id")
				}
				s := t.stream(*f.StreamID)
				if sent {
					if s.firstSent < 0 {
						s.firstSent = at
					}
					continue
				}
				if s.firstRecv < 0 {
					s.firstRecv = at
				}
				s.recvBytes += f.Length
				s.chunks = append(s.chunks, [2]float64{at, float64(f.Length)})
				if f.Fin {
					s.fin = at
				}
			}
		}
	case "recovery:packet_lost":
		t.lost++
		var p qlogPacket
		if json.Unmarshal(data, &p) == nil {
			t.lostBytes += p.Raw.Length
		}
	case "recovery:metrics_updated":
		var m qlogMetrics
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		set := func(dst *float64, v *float64) {
			if v != nil {
				*dst = *v
			}
		}
		set(&t.srtt, m.SmoothedRTT)
		set(&t.minRTT, m.MinRTT)
		set(&t.rttVar, m.RTTVariance)
		if m.Cwnd != nil {
			t.cwnd = *m.Cwnd
			if n := len(t.cwnds); n == 0 || t.cwnds[n-1] != float64(*m.Cwnd) {
				t.cwnds = append(t.cwnds, float64(*m.Cwnd))
			}
		}
		if m.InFlight != nil {
			t.inFlight = *m.InFlight
		}
		if m.PTOCount != nil {
			t.ptoCount = max(t.ptoCount, *m.PTOCount)
		}
	}
	return nil
}

func (t *trace) stream(id int64) *streamTrace {
	s := t.streams[id]
	if s == nil {
		s = &streamTrace{firstSent: -1, firstRecv: -1, fin: -1}
		t.streams[id] = s
	}
	return s
}

// requestStreams returns the client-initiated bidirectional streams (IDs 0,
// 4, 8...: the requests), in order.
func (t *trace) requestStreams() []int64 {
	var ids []int64
	for id := range t.streams {
		if id%4 == 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Multiplicative decreases of the congestion controllers ngtcp2 offers: on
// a loss, Cubic keeps 0.7 of its window, NewReno half; BBR does not cut
// its window by a factor.
const (
	cubicBeta = 0.7
	renoBeta  = 0.5
	betaSlack = 0.06
)

// fingerprint tells the congestion control from the window's reductions:
// the median ratio of each reduction that keeps more than a quarter of the
// window (persistent congestion's collapse to the minimum window is none
// of the algorithms' decrease). It returns "" when the window never fell
// (nothing was lost) or its ratios match neither algorithm's decrease.
func (t *trace) fingerprint() (algo string, reductions int) {
	var ratios []float64
	for i := 1; i < len(t.cwnds); i++ {
		r := t.cwnds[i] / t.cwnds[i-1]
		if r < 1 && r > 0.25 {
			ratios = append(ratios, r)
		}
	}
	if len(ratios) == 0 {
		return "", 0
	}
	sort.Float64s(ratios)
	med := ratios[len(ratios)/2]
	switch {
	case math.Abs(med-cubicBeta) <= betaSlack:
		return "cubic", len(ratios)
	case math.Abs(med-renoBeta) <= betaSlack:
		return "reno", len(ratios)
	}
	return "", len(ratios)
}

// transport turns the trace into the connection's statistics from side's
// view, congestion control algo as configured, unless the window's
// reductions say another (fingerprint): then that one, which the runner's
// check finds against the cell's.
//
// Its CongestionEvents count the window's reductions by a factor (those
// fingerprint reads).
//
// BBR does not cut its window by a factor: under it the reductions tell
// nothing and are not counted (NotMeasured).
func (t *trace) transport(side, algo string) model.TransportStats {
	fp, reductions := t.fingerprint()
	events := int64(reductions)
	switch {
	case algo == "bbr":
		events = model.NotMeasured
	case fp != "":
		algo = fp
	}
	return model.TransportStats{
		Kind: "quic", Side: side, CongestionAlgo: algo,
		SmoothedRTTms: t.srtt, RTTVarms: t.rttVar, MinRTTms: t.minRTT,
		CwndBytes: t.cwnd, SsthreshBytes: model.NotMeasured,
		PacketsSent: t.sent, PacketsLost: t.lost,
		Retransmits: t.lost, BytesRetransmitted: t.lostBytes,
		DeliveryRateBps:        model.NotMeasured,
		CongestionEvents:       events,
		PTOCount:               t.ptoCount,
		CongestionStateChanges: model.NotMeasured,
	}
}
