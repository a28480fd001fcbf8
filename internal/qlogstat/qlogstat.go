// Package qlogstat turns the event logs of QUIC connections into a few
// numbers per connection: losses, probe timeouts, the congestion window, the
// flow-control limits each side advertised and whether a sender was blocked
// by them, ACK frequency, and when each request and its response crossed
// the connection. It exists to explain browser samples (issue 31: why
// Firefox's HTTP/3 gained nothing on a lossy link where Chromium's gained a
// third) from the logs the stacks write themselves:
//
//   - qlog files of quic-go (quicbench's server, `--qlog`; JSON-SEQ), of
//     neqo (Firefox, `network.http.http3.enable_qlog`; JSON-SEQ) and of
//     aioquic (JSON), read by Read;
//   - Chromium's NetLog (`--log-net-log`), read by ReadNetLog, which has
//     far fewer transport figures (see there).
//
// Times are milliseconds from the log's reference time (the connection's
// start for every stack here). The reader knows the event names of qlog
// drafts 0.3 and later ("transport:packet_sent" and "quic:packet_sent" are
// the same event); events it does not know are counted in Conn.Events and
// otherwise ignored. A log cut short (a browser killed mid-write) is read
// up to its last complete event, and Conn.Truncated says so.
package qlogstat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Params are the transport parameters one side of a connection sent
// (RFC 9000, section 18.2): the flow-control windows it offers its peer
// and its ACK delay. Zero means not logged.
type Params struct {
	MaxData              int64   `json:"initial_max_data"`
	MaxStreamDataBidiLoc int64   `json:"initial_max_stream_data_bidi_local"`
	MaxStreamDataBidiRem int64   `json:"initial_max_stream_data_bidi_remote"`
	MaxStreamDataUni     int64   `json:"initial_max_stream_data_uni"`
	MaxStreamsBidi       int64   `json:"initial_max_streams_bidi"`
	MaxAckDelay          float64 `json:"max_ack_delay"` // ms
	MaxUDPPayload        int64   `json:"max_udp_payload_size"`
}

// Frames counts the frames of one type a connection sent and received.
type Frames struct {
	Sent     int `json:"sent"`
	Received int `json:"received"`
}

// Stream is one request stream (client-initiated bidirectional) as the log
// shows it. Times are ms from the log's reference time; -1 when not seen.
type Stream struct {
	ID int64 `json:"id"`
	// Request is when the first STREAM frame of the request crossed the
	// log's vantage point (sent by a client, received by a server).
	Request float64 `json:"request_ms"`
	// First and Last are when the first and the last STREAM frame of the
	// response crossed it (received by a client, sent by a server; a
	// server's retransmissions count, so Last is its last send).
	First float64 `json:"first_ms"`
	Last  float64 `json:"last_ms"`
	// Bytes is the response's length (the largest offset plus length
	// seen), HTTP/3 framing included.
	Bytes int64 `json:"bytes"`
	// Urgency is the stream's RFC 9218 priority as the server logged it
	// (e.g. "u=4, i"); empty when not logged.
	Priority string `json:"priority,omitempty"`
}

// Conn is one connection's figures.
type Conn struct {
	File    string    `json:"file,omitempty"`
	Title   string    `json:"title,omitempty"` // the log's title or code version, e.g. "quic-go qlog v0.65.0"
	Vantage string    `json:"vantage"`         // "client" or "server"
	ODCID   string    `json:"odcid,omitempty"` // the original destination connection ID (hex)
	Start   time.Time `json:"start,omitzero"`  // wall clock of the reference time; zero when the log has none
	// Duration is from the reference time to the last event.
	Duration  float64 `json:"duration_ms"`
	Truncated bool    `json:"truncated,omitempty"`

	Local  Params `json:"local_params"`
	Remote Params `json:"remote_params"`

	PacketsSent     int   `json:"packets_sent"`
	PacketsReceived int   `json:"packets_received"`
	BytesSent       int64 `json:"bytes_sent"`
	BytesReceived   int64 `json:"bytes_received"`
	// AcksSent and AcksReceived count packets carrying an ACK frame.
	AcksSent     int `json:"acks_sent"`
	AcksReceived int `json:"acks_received"`
	// AckElicitingReceived counts received packets with any frame but
	// ACK, PADDING and CONNECTION_CLOSE: what the peer's ACKs answer.
	AckElicitingReceived int `json:"ack_eliciting_received"`
	AckElicitingSent     int `json:"ack_eliciting_sent"`

	// Lost counts packets the log's stack declared lost (MTU probes
	// excluded); Spurious those it later found were not (quic-go's
	// recovery:spurious_loss). PTOs counts probe timeouts that fired (the
	// increments of pto_count, or timer expiries of type pto where the
	// stack logs no pto_count). Recoveries counts entries into the
	// congestion state "recovery".
	Lost       int `json:"lost"`
	Spurious   int `json:"spurious"`
	PTOs       int `json:"ptos"`
	Recoveries int `json:"recoveries"`
	// LostBy counts the declared losses by trigger
	// (reordering_threshold, time_threshold, pto_expired...).
	LostBy map[string]int `json:"lost_by,omitempty"`

	// The congestion window the log's stack reported: its smallest,
	// largest and last value, and the largest bytes in flight, in bytes;
	// zero when it reported none. CCAlgo is the congestion controller
	// when the log names it.
	CwndMin     int64  `json:"cwnd_min"`
	CwndMax     int64  `json:"cwnd_max"`
	CwndLast    int64  `json:"cwnd_last"`
	InFlightMax int64  `json:"in_flight_max"`
	CCAlgo      string `json:"cc_algo,omitempty"`
	// RTTs in ms as the stack last reported them (smoothed, minimum, and
	// the largest latest_rtt sample); 0 when not reported.
	SRTT   float64 `json:"srtt_ms"`
	MinRTT float64 `json:"min_rtt_ms"`
	MaxRTT float64 `json:"max_latest_rtt_ms"`
	// PacingRate is the largest pacing rate reported (bytes per second;
	// neqo reports it), 0 when not reported.
	PacingRate int64 `json:"pacing_rate,omitempty"`

	// Flow control: frames that raise a limit and frames that say a
	// sender is blocked at one.
	MaxData           Frames `json:"max_data"`
	MaxStreamData     Frames `json:"max_stream_data"`
	MaxStreams        Frames `json:"max_streams"`
	DataBlocked       Frames `json:"data_blocked"`
	StreamDataBlocked Frames `json:"stream_data_blocked"`
	StreamsBlocked    Frames `json:"streams_blocked"`

	// KeyUpdates are the times of the 1-RTT key updates the log shows
	// (quic-go: security:key_updated with trigger local_update or
	// remote_update; Chromium: QUIC_SESSION_KEY_UPDATE).
	KeyUpdates []float64 `json:"key_updates,omitempty"`
	// Dropped counts packets the stack received and discarded, by reason
	// (neqo: transport:packet_dropped's details, e.g. "packet number
	// overlap"); DroppedFirst and DroppedLast are the first and the last
	// such drop of a 1-RTT packet (ms; -1 when none): the handshake's
	// discards (a late Initial) are counted but not timed.
	Dropped      map[string]int `json:"dropped,omitempty"`
	DroppedFirst float64        `json:"dropped_first_ms"`
	DroppedLast  float64        `json:"dropped_last_ms"`
	// LossBurst is the largest number of packets declared lost within one
	// millisecond: a whole flight declared lost at once (a receiver that
	// discarded it, or a dead path) rather than scattered random losses.
	LossBurst int `json:"loss_burst"`
	// LoadEnd, when the figures are for the page load only (ReadOptions
	// LoadOnly), is where they stop: the last response STREAM frame at the
	// vantage point (ms). 0 for the whole connection.
	LoadEnd float64 `json:"load_end_ms,omitempty"`

	// Streams are the request streams, by stream ID.
	Streams []Stream `json:"streams"`

	// Events counts every event by its normalised name.
	Events map[string]int `json:"events"`
}

// Requests returns the request streams that carried a request.
func (c *Conn) Requests() []Stream {
	var out []Stream
	for _, s := range c.Streams {
		if s.Request >= 0 {
			out = append(out, s)
		}
	}
	return out
}

// Load summarises the page load on the connection: the first and the last
// request, the end of the last response, the largest number of requests
// outstanding at once (request seen, response not yet ended), and the
// median time from a request to its response's first byte at the vantage
// point. Times are ms from the reference time; -1 when there is no request.
func (c *Conn) Load() (first, last, end float64, concurrent int, medianTTFB float64) {
	reqs := c.Requests()
	if len(reqs) == 0 {
		return -1, -1, -1, 0, -1
	}
	first, last, end = math.Inf(1), math.Inf(-1), math.Inf(-1)
	type edge struct {
		t float64
		d int
	}
	var edges []edge
	var ttfb []float64
	for _, s := range reqs {
		first = min(first, s.Request)
		last = max(last, s.Request)
		if s.Last >= 0 {
			end = max(end, s.Last)
			edges = append(edges, edge{s.Request, 1}, edge{s.Last, -1})
		} else {
			edges = append(edges, edge{s.Request, 1})
		}
		if s.First >= 0 {
			ttfb = append(ttfb, s.First-s.Request)
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.t != b.t {
			return cmpFloat(a.t, b.t)
		}
		return b.d - a.d // a start before an end at the same time
	})
	n := 0
	for _, e := range edges {
		n += e.d
		concurrent = max(concurrent, n)
	}
	if math.IsInf(end, -1) {
		end = -1
	}
	medianTTFB = -1
	if len(ttfb) > 0 {
		slices.Sort(ttfb)
		medianTTFB = ttfb[len(ttfb)/2]
		if len(ttfb)%2 == 0 {
			medianTTFB = (ttfb[len(ttfb)/2-1] + ttfb[len(ttfb)/2]) / 2
		}
	}
	return first, last, end, concurrent, medianTTFB
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ErrNotQlog is returned (wrapped) by Read for input that is neither a
// JSON-SEQ nor a JSON qlog.
var ErrNotQlog = errors.New("not a qlog file")

// ReadOptions configure Read.
type ReadOptions struct {
	// LoadOnly keeps only the events up to the last response STREAM frame
	// of any request stream (Conn.LoadEnd): what happened during the page
	// load, without a connection's idle tail (a browser killed after the
	// load leaves the server probing a dead peer until its idle timeout:
	// probe timeouts and losses that are no part of the sample).
	LoadOnly bool
}

// Read reads one qlog file: JSON-SEQ (records separated by the RS
// character, 0x1E; quic-go and neqo) or JSON (a "traces" array; aioquic).
// A JSON file may hold several traces: Read returns one Conn per trace.
func Read(r io.Reader, opt ReadOptions) ([]*Conn, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, err := br.Peek(1)
	if err != nil {
		return nil, fmt.Errorf("%w: empty input", ErrNotQlog)
	}
	if head[0] == 0x1e {
		c, err := readSeq(br, opt)
		if err != nil {
			return nil, err
		}
		return []*Conn{c}, nil
	}
	if head[0] == '{' {
		return readJSON(br, opt)
	}
	return nil, fmt.Errorf("%w: starts with %q", ErrNotQlog, head)
}

// header is the part of a qlog header (JSON-SEQ's first record, or one
// JSON trace) the reader uses.
type header struct {
	Title       string `json:"title"`
	CodeVersion string `json:"code_version"`
	Trace       trace  `json:"trace"`
}

type trace struct {
	Title        string `json:"title"`
	VantagePoint struct {
		Type string `json:"type"`
	} `json:"vantage_point"`
	CommonFields struct {
		ODCID         string          `json:"ODCID"`
		GroupID       string          `json:"group_id"`
		ReferenceTime json.RawMessage `json:"reference_time"`
	} `json:"common_fields"`
	Events []json.RawMessage `json:"events"`
}

// readSeq reads a JSON-SEQ qlog: a header record, then one event per
// record.
func readSeq(br *bufio.Reader, opt ReadOptions) (*Conn, error) {
	var h *header
	var events []json.RawMessage
	truncated := false
	for n := 0; ; {
		rec, err := br.ReadBytes(0x1e)
		rec = bytes.TrimSpace(bytes.TrimSuffix(rec, []byte{0x1e}))
		if len(rec) > 0 {
			n++ // records from 1, the header's included
			if h == nil {
				h = new(header)
				if jerr := json.Unmarshal(rec, h); jerr != nil {
					return nil, fmt.Errorf("%w: header: %v", ErrNotQlog, jerr)
				}
			} else if !json.Valid(rec) {
				if err != io.EOF {
					return nil, fmt.Errorf("record %d (the header is 1): not valid JSON", n)
				}
				truncated = true // a last record cut short
			} else {
				events = append(events, rec)
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if h == nil {
		return nil, fmt.Errorf("%w: no header record", ErrNotQlog)
	}
	c, err := process(h.Title, h.CodeVersion, h.Trace, events, opt)
	if err != nil {
		return nil, err
	}
	c.Truncated = truncated
	return c, nil
}

// readJSON reads a JSON qlog with a "traces" array.
func readJSON(br *bufio.Reader, opt ReadOptions) ([]*Conn, error) {
	var f struct {
		Title  string  `json:"title"`
		Traces []trace `json:"traces"`
	}
	if err := json.NewDecoder(br).Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotQlog, err)
	}
	if len(f.Traces) == 0 {
		return nil, fmt.Errorf("%w: no traces", ErrNotQlog)
	}
	var out []*Conn
	for i, t := range f.Traces {
		c, err := process(f.Title, "", t, t.Events, opt)
		if err != nil {
			return nil, fmt.Errorf("trace %d: %w", i, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// process turns one trace's events into a Conn; with LoadOnly it reads
// them twice, the second time up to the end of the last response.
func process(title, version string, t trace, events []json.RawMessage, opt ReadOptions) (*Conn, error) {
	run := func(until float64) (*Conn, error) {
		c, st := newConn(title, version, t)
		st.until = until
		for i, ev := range events {
			if err := st.event(ev); err != nil {
				return nil, fmt.Errorf("event %d: %w", i, err)
			}
		}
		st.finish()
		return c, nil
	}
	c, err := run(math.Inf(1))
	if err != nil || !opt.LoadOnly {
		return c, err
	}
	end := -1.0
	for _, s := range c.Streams {
		end = max(end, s.Last)
	}
	if end < 0 {
		return c, nil // no response: nothing to cut
	}
	lc, err := run(end)
	if err != nil {
		return nil, err
	}
	lc.LoadEnd = end
	return lc, nil
}

func newConn(title, version string, t trace) (*Conn, *state) {
	c := &Conn{Vantage: t.VantagePoint.Type, Events: map[string]int{}, CwndMin: -1, DroppedFirst: -1, DroppedLast: -1}
	c.Title = strings.TrimSpace(strings.Join(nonEmpty(title, t.Title, version), " "))
	c.ODCID = t.CommonFields.ODCID
	if c.ODCID == "" {
		c.ODCID = t.CommonFields.GroupID
	}
	c.Start = referenceTime(t.CommonFields.ReferenceTime)
	return c, &state{c: c, streams: map[int64]*Stream{}, lostAt: map[int64]int{}, until: math.Inf(1)}
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, v := range s {
		if v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// referenceTime reads qlog's reference_time: a number of ms since the
// Unix epoch (qlog 0.3, neqo), or an object with wall_clock_time
// (RFC 3339; later drafts, quic-go).
func referenceTime(raw json.RawMessage) time.Time {
	if len(raw) == 0 {
		return time.Time{}
	}
	var ms float64
	if json.Unmarshal(raw, &ms) == nil && ms > 0 {
		return time.UnixMicro(int64(ms * 1000))
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
			return time.UnixMicro(int64(v * 1000))
		}
	}
	var o struct {
		Wall  string `json:"wall_clock_time"`
		Epoch string `json:"epoch"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Wall != "" {
		if t, err := time.Parse(time.RFC3339Nano, o.Wall); err == nil {
			return t
		}
	}
	return time.Time{}
}

// state is the reader's per-connection state while it reads events.
type state struct {
	c         *Conn
	streams   map[int64]*Stream
	ptoSeen   bool // the stack logs pto_count
	ptoTimers int  // timer expiries of type pto
	ptoCount  int64
	lostAt    map[int64]int // packets declared lost per millisecond
	until     float64       // events after this time are ignored
}

// event is one qlog event. Older formats (qlog 0.1/0.2, arrays of
// [time, category, event, data]) are not supported.
type event struct {
	Time     float64         `json:"time"`
	Name     string          `json:"name"`
	Category string          `json:"category"`
	Type     string          `json:"event"`
	Data     json.RawMessage `json:"data"`
}

type frame struct {
	Type     string          `json:"frame_type"`
	StreamID json.Number     `json:"stream_id"`
	Offset   int64           `json:"offset"`
	Length   int64           `json:"length"`
	Fin      bool            `json:"fin"`
	Maximum  json.Number     `json:"maximum"`
	Limit    json.Number     `json:"limit"`
	Ranges   json.RawMessage `json:"acked_ranges"`
}

type packet struct {
	Header struct {
		PacketType string `json:"packet_type"`
	} `json:"header"`
	Raw struct {
		Length int64 `json:"length"`
	} `json:"raw"`
	Frames []frame `json:"frames"`
}

// name returns the event's name without its category ("packet_sent"),
// whatever the draft: "transport:packet_sent", "quic:packet_sent" or
// category "transport" with event "packet_sent".
func (e *event) name() string {
	n := e.Name
	if n == "" {
		n = e.Type
	}
	if i := strings.LastIndexByte(n, ':'); i >= 0 {
		n = n[i+1:]
	}
	return n
}

func (st *state) event(raw []byte) error {
	var e event
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&e); err != nil {
		return err
	}
	if e.Time > st.until {
		return nil
	}
	c := st.c
	name := e.name()
	c.Events[name]++
	c.Duration = max(c.Duration, e.Time)
	switch name {
	case "packet_sent", "packet_received":
		var p packet
		if err := json.Unmarshal(e.Data, &p); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		st.packet(e.Time, name == "packet_sent", &p)
	case "parameters_set":
		var p struct {
			Owner     string `json:"owner"`
			Initiator string `json:"initiator"`
			Params
			CC string `json:"congestion_control"`
		}
		if err := json.Unmarshal(e.Data, &p); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		who := p.Owner
		if who == "" {
			who = p.Initiator
		}
		switch who {
		case "local":
			merge(&c.Local, p.Params)
		case "remote":
			merge(&c.Remote, p.Params)
		}
	case "packet_lost":
		var p struct {
			Header struct {
				PacketType string `json:"packet_type"`
			} `json:"header"`
			Trigger    string `json:"trigger"`
			IsMTUProbe bool   `json:"is_mtu_probe_packet"`
		}
		_ = json.Unmarshal(e.Data, &p)
		if !p.IsMTUProbe {
			c.Lost++
			st.lostAt[int64(math.Floor(e.Time))]++
			if c.LostBy == nil {
				c.LostBy = map[string]int{}
			}
			t := p.Trigger
			if t == "" {
				t = "unknown"
			}
			c.LostBy[t]++
		}
	case "spurious_loss":
		c.Spurious++
	case "metrics_updated":
		var m struct {
			Cwnd       *int64   `json:"congestion_window"`
			InFlight   *int64   `json:"bytes_in_flight"`
			SRTT       *float64 `json:"smoothed_rtt"`
			MinRTT     *float64 `json:"min_rtt"`
			LatestRTT  *float64 `json:"latest_rtt"`
			PTOCount   *int64   `json:"pto_count"`
			PacingRate *int64   `json:"pacing_rate"`
		}
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if m.Cwnd != nil {
			if c.CwndMin < 0 || *m.Cwnd < c.CwndMin {
				c.CwndMin = *m.Cwnd
			}
			c.CwndMax = max(c.CwndMax, *m.Cwnd)
			c.CwndLast = *m.Cwnd
		}
		if m.InFlight != nil {
			c.InFlightMax = max(c.InFlightMax, *m.InFlight)
		}
		if m.SRTT != nil {
			c.SRTT = *m.SRTT
		}
		if m.MinRTT != nil {
			c.MinRTT = *m.MinRTT
		}
		if m.LatestRTT != nil {
			c.MaxRTT = max(c.MaxRTT, *m.LatestRTT)
		}
		if m.PacingRate != nil {
			c.PacingRate = max(c.PacingRate, *m.PacingRate)
		}
		if m.PTOCount != nil {
			st.ptoSeen = true
			if *m.PTOCount > st.ptoCount {
				c.PTOs += int(*m.PTOCount - st.ptoCount)
			}
			st.ptoCount = *m.PTOCount
		}
	case "loss_timer_updated":
		var t struct {
			EventType string `json:"event_type"`
			TimerType string `json:"timer_type"`
		}
		_ = json.Unmarshal(e.Data, &t)
		if t.EventType == "expired" && t.TimerType == "pto" {
			st.ptoTimers++
		}
	case "congestion_state_updated":
		var s struct {
			New string `json:"new"`
		}
		_ = json.Unmarshal(e.Data, &s)
		if strings.Contains(strings.ToLower(s.New), "recovery") {
			c.Recoveries++
		}
	case "priority_updated":
		var p struct {
			StreamID json.Number `json:"stream_id"`
			New      string      `json:"new"`
		}
		d := json.NewDecoder(bytes.NewReader(e.Data))
		d.UseNumber()
		if d.Decode(&p) == nil {
			if id, err := p.StreamID.Int64(); err == nil && id%4 == 0 {
				st.stream(id).Priority = p.New
			}
		}
	case "key_updated":
		var k struct {
			Trigger string `json:"trigger"`
			KeyType string `json:"key_type"`
		}
		_ = json.Unmarshal(e.Data, &k)
		// Both directions' keys change at once (two events): count the
		// update once.
		if k.Trigger == "local_update" || k.Trigger == "remote_update" {
			if n := len(c.KeyUpdates); n == 0 || e.Time-c.KeyUpdates[n-1] > 1 {
				c.KeyUpdates = append(c.KeyUpdates, e.Time)
			}
		}
	case "packet_dropped":
		var d struct {
			Header struct {
				PacketType string `json:"packet_type"`
			} `json:"header"`
			Details string `json:"details"`
			Trigger string `json:"trigger"`
		}
		_ = json.Unmarshal(e.Data, &d)
		st.dropped(e.Time, cmpOr(d.Details, d.Trigger, "unknown"), d.Header.PacketType == "" || strings.EqualFold(d.Header.PacketType, "1RTT"))
	}
	return nil
}

// dropped accounts one received packet the stack discarded; timed says
// whether it counts for DroppedFirst and DroppedLast.
func (st *state) dropped(t float64, reason string, timed bool) {
	c := st.c
	if c.Dropped == nil {
		c.Dropped = map[string]int{}
	}
	c.Dropped[reason]++
	if !timed {
		return
	}
	if c.DroppedFirst < 0 || t < c.DroppedFirst {
		c.DroppedFirst = t
	}
	c.DroppedLast = max(c.DroppedLast, t)
}

func cmpOr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func merge(dst *Params, p Params) {
	set := func(d *int64, v int64) {
		if v != 0 {
			*d = v
		}
	}
	set(&dst.MaxData, p.MaxData)
	set(&dst.MaxStreamDataBidiLoc, p.MaxStreamDataBidiLoc)
	set(&dst.MaxStreamDataBidiRem, p.MaxStreamDataBidiRem)
	set(&dst.MaxStreamDataUni, p.MaxStreamDataUni)
	set(&dst.MaxStreamsBidi, p.MaxStreamsBidi)
	set(&dst.MaxUDPPayload, p.MaxUDPPayload)
	if p.MaxAckDelay != 0 {
		dst.MaxAckDelay = p.MaxAckDelay
	}
}

func (st *state) stream(id int64) *Stream {
	s := st.streams[id]
	if s == nil {
		s = &Stream{ID: id, Request: -1, First: -1, Last: -1}
		st.streams[id] = s
	}
	return s
}

// packet accounts one packet sent (out) or received.
func (st *state) packet(t float64, out bool, p *packet) {
	c := st.c
	if out {
		c.PacketsSent++
		c.BytesSent += p.Raw.Length
	} else {
		c.PacketsReceived++
		c.BytesReceived += p.Raw.Length
	}
	count := func(f *Frames) {
		if out {
			f.Sent++
		} else {
			f.Received++
		}
	}
	// Request bytes go from client to server: out at a client, in at a
	// server.
	toServer := out == (c.Vantage == "client")
	hasAck, eliciting := false, false
	for _, f := range p.Frames {
		switch strings.ToLower(f.Type) {
		case "ack", "ack_ecn":
			hasAck = true
			continue
		case "padding", "connection_close":
			continue
		case "max_data":
			count(&c.MaxData)
		case "max_stream_data":
			count(&c.MaxStreamData)
		case "max_streams":
			count(&c.MaxStreams)
		case "data_blocked":
			count(&c.DataBlocked)
		case "stream_data_blocked":
			count(&c.StreamDataBlocked)
		case "streams_blocked":
			count(&c.StreamsBlocked)
		case "stream":
			id, err := f.StreamID.Int64()
			if err != nil || id%4 != 0 { // request streams only
				break
			}
			s := st.stream(id)
			if toServer {
				if s.Request < 0 {
					s.Request = t
				}
			} else {
				if s.First < 0 {
					s.First = t
				}
				s.Last = max(s.Last, t)
				s.Bytes = max(s.Bytes, f.Offset+f.Length)
			}
		}
		eliciting = true
	}
	if hasAck {
		if out {
			c.AcksSent++
		} else {
			c.AcksReceived++
		}
	}
	if eliciting {
		if out {
			c.AckElicitingSent++
		} else {
			c.AckElicitingReceived++
		}
	}
}

func (st *state) finish() {
	c := st.c
	if !st.ptoSeen {
		c.PTOs = st.ptoTimers
	}
	if c.CwndMin < 0 {
		c.CwndMin = 0
	}
	for _, n := range st.lostAt {
		c.LossBurst = max(c.LossBurst, n)
	}
	slices.Sort(c.KeyUpdates)
	ids := make([]int64, 0, len(st.streams))
	for id := range st.streams {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.Streams = append(c.Streams, *st.streams[id])
	}
}
