package qlogstat

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrNotNetLog is returned (wrapped) by ReadNetLog for input that is not a
// Chromium NetLog.
var ErrNotNetLog = errors.New("not a NetLog")

// ReadNetLog reads a Chromium NetLog (--log-net-log=FILE, capture mode
// Everything) and returns one Conn per QUIC session, with the client's
// view: packets and bytes sent and received, ACK frames sent and received,
// packets Chromium declared lost (QUIC_SESSION_PACKET_LOST), flow-control
// frames (WINDOW_UPDATE: MAX_DATA for stream -1, else MAX_STREAM_DATA;
// BLOCKED: DATA_BLOCKED for stream -1, else STREAM_DATA_BLOCKED), both
// sides' transport parameters, the congestion controller Chromium
// configured, key updates, packets it dropped (Dropped: the events whose
// name says DROPPED, e.g. QUIC_SESSION_DROPPED_UNDECRYPTABLE_PACKET) and
// each request
// stream (request headers sent, response STREAM frames received). NetLog
// has no congestion window, RTT or probe timeout: those figures stay 0.
// Times are ms from the session's start. A file cut short (a browser
// killed before it closed its log) is an error: NetLog is one JSON object.
// opt.LoadOnly works as for Read.
func ReadNetLog(r io.Reader, opt ReadOptions) ([]*Conn, error) {
	var f struct {
		Constants struct {
			EventTypes     map[string]int  `json:"logEventTypes"`
			SourceTypes    map[string]int  `json:"logSourceType"`
			TimeTickOffset json.RawMessage `json:"timeTickOffset"`
		} `json:"constants"`
		Events []struct {
			Time   string `json:"time"`
			Type   int    `json:"type"`
			Phase  int    `json:"phase"`
			Source struct {
				ID   int `json:"id"`
				Type int `json:"type"`
			} `json:"source"`
			Params json.RawMessage `json:"params"`
		} `json:"events"`
	}
	if err := json.NewDecoder(bufio.NewReaderSize(r, 1<<20)).Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotNetLog, err)
	}
	if len(f.Constants.EventTypes) == 0 {
		return nil, fmt.Errorf("%w: no constants.logEventTypes", ErrNotNetLog)
	}
	names := make(map[int]string, len(f.Constants.EventTypes))
	for n, id := range f.Constants.EventTypes {
		names[id] = n
	}
	quicSource, ok := f.Constants.SourceTypes["QUIC_SESSION"]
	if !ok {
		return nil, fmt.Errorf("%w: no QUIC_SESSION source type", ErrNotNetLog)
	}
	offset, _ := strconv.ParseFloat(strings.Trim(string(f.Constants.TimeTickOffset), `"`), 64)

	type session struct {
		start  float64
		events []nlEvent
	}
	sessions := map[int]*session{}
	var order []int
	for _, e := range f.Events {
		if e.Source.Type != quicSource {
			continue
		}
		t, err := strconv.ParseFloat(e.Time, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: event time %q", ErrNotNetLog, e.Time)
		}
		s := sessions[e.Source.ID]
		if s == nil {
			s = &session{start: t}
			sessions[e.Source.ID] = s
			order = append(order, e.Source.ID)
		}
		s.events = append(s.events, nlEvent{t: t - s.start, name: names[e.Type], params: e.Params})
	}
	var out []*Conn
	for _, id := range order {
		s := sessions[id]
		run := func(until float64) *Conn {
			c := netLogConn(s.events, until)
			if offset > 0 {
				c.Start = time.UnixMicro(int64((offset + s.start) * 1000))
			}
			return c
		}
		c := run(math.Inf(1))
		if opt.LoadOnly {
			end := -1.0
			for _, st := range c.Streams {
				end = max(end, st.Last)
			}
			if end >= 0 {
				c = run(end)
				c.LoadEnd = end
			}
		}
		out = append(out, c)
	}
	return out, nil
}

type nlEvent struct {
	t      float64
	name   string
	params json.RawMessage
}

// netLogConn turns one QUIC session's events into a Conn.
func netLogConn(events []nlEvent, until float64) *Conn {
	c := &Conn{Vantage: "client", Title: "NetLog", Events: map[string]int{}, DroppedFirst: -1, DroppedLast: -1}
	st := &state{c: c, streams: map[int64]*Stream{}, lostAt: map[int64]int{}, until: until}
	for _, e := range events {
		if e.t > until {
			continue
		}
		c.Events[e.name]++
		c.Duration = max(c.Duration, e.t)
		var p struct {
			ConnectionID string  `json:"connection_id"`
			Size         int64   `json:"size"`
			StreamID     *int64  `json:"stream_id"`
			Offset       int64   `json:"offset"`
			Length       int64   `json:"length"`
			CC           string  `json:"congestion_control_type"`
			Params       string  `json:"quic_transport_parameters"`
			Transmission *string `json:"transmission_type"`
		}
		_ = json.Unmarshal(e.params, &p)
		frames := func(f *Frames, sent bool) {
			if sent {
				f.Sent++
			} else {
				f.Received++
			}
		}
		connLevel := p.StreamID != nil && *p.StreamID == -1
		switch e.name {
		case "QUIC_SESSION":
			if p.ConnectionID != "" && c.ODCID == "" {
				c.ODCID = p.ConnectionID
			}
		case "QUIC_SESSION_PACKET_SENT":
			c.PacketsSent++
			c.BytesSent += p.Size
		case "QUIC_SESSION_PACKET_RECEIVED":
			c.PacketsReceived++
			c.BytesReceived += p.Size
		case "QUIC_SESSION_ACK_FRAME_SENT":
			c.AcksSent++
		case "QUIC_SESSION_ACK_FRAME_RECEIVED":
			c.AcksReceived++
		case "QUIC_SESSION_PACKET_LOST":
			c.Lost++
			st.lostAt[int64(math.Floor(e.t))]++
		case "QUIC_SESSION_WINDOW_UPDATE_FRAME_SENT", "QUIC_SESSION_WINDOW_UPDATE_FRAME_RECEIVED":
			sent := strings.HasSuffix(e.name, "_SENT")
			if connLevel {
				frames(&c.MaxData, sent)
			} else {
				frames(&c.MaxStreamData, sent)
			}
		case "QUIC_SESSION_BLOCKED_FRAME_SENT", "QUIC_SESSION_BLOCKED_FRAME_RECEIVED":
			sent := strings.HasSuffix(e.name, "_SENT")
			if connLevel {
				frames(&c.DataBlocked, sent)
			} else {
				frames(&c.StreamDataBlocked, sent)
			}
		case "QUIC_SESSION_MAX_STREAMS_FRAME_SENT":
			c.MaxStreams.Sent++
		case "QUIC_SESSION_MAX_STREAMS_FRAME_RECEIVED":
			c.MaxStreams.Received++
		case "QUIC_SESSION_STREAMS_BLOCKED_FRAME_SENT":
			c.StreamsBlocked.Sent++
		case "QUIC_SESSION_STREAMS_BLOCKED_FRAME_RECEIVED":
			c.StreamsBlocked.Received++
		case "QUIC_CONGESTION_CONTROL_CONFIGURED":
			c.CCAlgo = p.CC
		case "QUIC_SESSION_TRANSPORT_PARAMETERS_SENT":
			merge(&c.Local, parseNetLogParams(p.Params))
		case "QUIC_SESSION_TRANSPORT_PARAMETERS_RECEIVED":
			merge(&c.Remote, parseNetLogParams(p.Params))
		case "QUIC_SESSION_KEY_UPDATE":
			c.KeyUpdates = append(c.KeyUpdates, e.t)
		case "HTTP3_HEADERS_SENT":
			if p.StreamID != nil && *p.StreamID%4 == 0 {
				s := st.stream(*p.StreamID)
				if s.Request < 0 {
					s.Request = e.t
				}
			}
		case "QUIC_SESSION_STREAM_FRAME_RECEIVED":
			if p.StreamID != nil && *p.StreamID >= 0 && *p.StreamID%4 == 0 {
				s := st.stream(*p.StreamID)
				if s.First < 0 {
					s.First = e.t
				}
				s.Last = max(s.Last, e.t)
				s.Bytes = max(s.Bytes, p.Offset+p.Length)
			}
		default:
			// QUIC_SESSION_DROPPED_UNDECRYPTABLE_PACKET and the like;
			// BUFFERED_UNDECRYPTABLE (a packet kept until its keys
			// arrive, in the handshake) is no drop.
			if strings.Contains(e.name, "DROPPED") {
				// NetLog does not say which packet number space the
				// packet was in: counted, not timed (Conn.DroppedFirst).
				st.dropped(e.t, strings.ToLower(strings.TrimPrefix(e.name, "QUIC_SESSION_")), false)
			}
		}
	}
	st.finish()
	return c
}

// parseNetLogParams reads the transport parameters Chromium logs as one
// string ("[Client ... initial_max_data 15728640 ...]").
func parseNetLogParams(s string) Params {
	f := strings.Fields(strings.Trim(s, "[]"))
	var p Params
	num := func(i int) int64 {
		if i+1 >= len(f) {
			return 0
		}
		v, _ := strconv.ParseInt(f[i+1], 10, 64)
		return v
	}
	for i, k := range f {
		switch k {
		case "initial_max_data":
			p.MaxData = num(i)
		case "initial_max_stream_data_bidi_local":
			p.MaxStreamDataBidiLoc = num(i)
		case "initial_max_stream_data_bidi_remote":
			p.MaxStreamDataBidiRem = num(i)
		case "initial_max_stream_data_uni":
			p.MaxStreamDataUni = num(i)
		case "initial_max_streams_bidi":
			p.MaxStreamsBidi = num(i)
		case "max_udp_payload_size":
			p.MaxUDPPayload = num(i)
		case "max_ack_delay":
			p.MaxAckDelay = float64(num(i))
		}
	}
	return p
}
