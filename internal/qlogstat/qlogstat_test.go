package qlogstat

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// seq joins records into a JSON-SEQ text (each record after an RS).
func seq(records ...string) string {
	var b strings.Builder
	for _, r := range records {
		b.WriteString("\x1e")
		b.WriteString(r)
		b.WriteString("\n")
	}
	return b.String()
}

// serverLog is a quic-go-style server trace: a request on stream 0 and on
// stream 4, their responses, a key update, a burst of three losses (one
// later found spurious), a PTO, and after the last response a dead peer's
// tail (two more PTOs and a loss).
var serverLog = seq(
	`{"qlog_version":"0.3","qlog_format":"JSON-SEQ","title":"quic-go qlog","code_version":"v0.65.0","trace":{"vantage_point":{"type":"server"},"common_fields":{"group_id":"0a0b","reference_time":{"clock_type":"monotonic","wall_clock_time":"2026-11-27T17:58:10.5Z"}}}}`,
	`{"time":1,"name":"transport:parameters_set","data":{"initiator":"remote","initial_max_data":25165824,"initial_max_stream_data_bidi_local":12582912,"max_ack_delay":20}}`,
	`{"time":1,"name":"transport:parameters_set","data":{"initiator":"local","initial_max_data":33554432}}`,
	`{"time":50,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","packet_number":2},"raw":{"length":300},"frames":[{"frame_type":"stream","stream_id":0,"offset":0,"length":280,"fin":true}]}}`,
	`{"time":52,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":10},"raw":{"length":1280},"frames":[{"frame_type":"ack","acked_ranges":[[0,2]]},{"frame_type":"stream","stream_id":0,"offset":0,"length":1200}]}}`,
	`{"time":60,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","packet_number":3},"raw":{"length":100},"frames":[{"frame_type":"ack","acked_ranges":[[10,10]]},{"frame_type":"stream","stream_id":4,"offset":0,"length":60,"fin":true}]}}`,
	`{"time":61,"name":"transport:priority_updated","data":{"stream_id":4,"new":"u=4, i"}}`,
	`{"time":62,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":11},"raw":{"length":1280},"frames":[{"frame_type":"stream","stream_id":4,"offset":0,"length":1200},{"frame_type":"data_blocked","limit":100}]}}`,
	`{"time":64,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":12},"raw":{"length":200},"frames":[{"frame_type":"stream","stream_id":0,"offset":1200,"length":100,"fin":true}]}}`,
	`{"time":63,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","packet_number":4},"raw":{"length":40},"frames":[{"frame_type":"max_data","maximum":50000000}]}}`,
	`{"time":70,"name":"recovery:metrics_updated","data":{"congestion_window":40960,"bytes_in_flight":2560,"smoothed_rtt":50,"min_rtt":30,"latest_rtt":45}}`,
	`{"time":80,"name":"security:key_updated","data":{"trigger":"local_update","key_type":"client_1rtt_secret","key_phase":1}}`,
	`{"time":80.01,"name":"security:key_updated","data":{"trigger":"local_update","key_type":"server_1rtt_secret","key_phase":1}}`,
	`{"time":90.2,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT","packet_number":18},"trigger":"time_threshold"}}`,
	`{"time":90.4,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT","packet_number":13},"trigger":"time_threshold"}}`,
	`{"time":90.6,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT","packet_number":14},"trigger":"reordering_threshold"}}`,
	`{"time":90.7,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT","packet_number":15},"trigger":"time_threshold","is_mtu_probe_packet":true}}`,
	`{"time":90.8,"name":"recovery:congestion_state_updated","data":{"new":"recovery"}}`,
	`{"time":91,"name":"recovery:metrics_updated","data":{"congestion_window":20480}}`,
	`{"time":95,"name":"recovery:spurious_loss","data":{"packet_number":18}}`,
	`{"time":120,"name":"recovery:metrics_updated","data":{"pto_count":1}}`,
	`{"time":130,"name":"recovery:metrics_updated","data":{"pto_count":0}}`,
	`{"time":200,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":16},"raw":{"length":900},"frames":[{"frame_type":"stream","stream_id":4,"offset":1200,"length":800,"fin":true}]}}`,
	`{"time":210,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","packet_number":5},"raw":{"length":40},"frames":[{"frame_type":"ack","acked_ranges":[[16,16]]}]}}`,
	`{"time":300,"name":"recovery:metrics_updated","data":{"pto_count":1}}`,
	`{"time":600,"name":"recovery:metrics_updated","data":{"pto_count":2}}`,
	`{"time":601,"name":"recovery:packet_lost","data":{"header":{"packet_type":"1RTT","packet_number":17},"trigger":"pto_expired"}}`,
	`{"time":900,"name":"recovery:metrics_updated","data":{"congestion_window":2560}}`,
)

func readOne(t *testing.T, text string, opt ReadOptions) *Conn {
	t.Helper()
	cs, err := Read(strings.NewReader(text), opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 {
		t.Fatalf("%d connections, want 1", len(cs))
	}
	return cs[0]
}

func TestReadServerLog(t *testing.T) {
	c := readOne(t, serverLog, ReadOptions{})
	if c.Vantage != "server" || c.Title != "quic-go qlog v0.65.0" || c.ODCID != "0a0b" {
		t.Errorf("header: %q %q %q", c.Vantage, c.Title, c.ODCID)
	}
	if want := time.Date(2026, 11, 27, 17, 58, 10, 500e6, time.UTC); !c.Start.Equal(want) {
		t.Errorf("start %v, want %v", c.Start, want)
	}
	if c.Remote.MaxData != 25165824 || c.Remote.MaxStreamDataBidiLoc != 12582912 || c.Remote.MaxAckDelay != 20 || c.Local.MaxData != 33554432 {
		t.Errorf("params: local %+v remote %+v", c.Local, c.Remote)
	}
	if c.PacketsSent != 4 || c.PacketsReceived != 4 || c.BytesSent != 3660 || c.AcksReceived != 2 || c.AcksSent != 1 {
		t.Errorf("packets: sent %d (%d B) recv %d, acks recv %d sent %d", c.PacketsSent, c.BytesSent, c.PacketsReceived, c.AcksReceived, c.AcksSent)
	}
	// The MTU probe is not a loss; the tail's loss is.
	if c.Lost != 4 || c.Spurious != 1 || c.LossBurst != 3 || c.LostBy["time_threshold"] != 2 || c.LostBy["pto_expired"] != 1 {
		t.Errorf("losses: %d, spurious %d, burst %d, by %v", c.Lost, c.Spurious, c.LossBurst, c.LostBy)
	}
	if c.PTOs != 3 || c.Recoveries != 1 {
		t.Errorf("PTOs %d (want 3), recoveries %d", c.PTOs, c.Recoveries)
	}
	if c.CwndMin != 2560 || c.CwndMax != 40960 || c.CwndLast != 2560 || c.InFlightMax != 2560 || c.SRTT != 50 || c.MinRTT != 30 {
		t.Errorf("cwnd %d..%d last %d, in flight %d, srtt %v min %v", c.CwndMin, c.CwndMax, c.CwndLast, c.InFlightMax, c.SRTT, c.MinRTT)
	}
	if len(c.KeyUpdates) != 1 || c.KeyUpdates[0] != 80 {
		t.Errorf("key updates %v, want one at 80 ms (two events, one update)", c.KeyUpdates)
	}
	if c.DataBlocked.Sent != 1 || c.MaxData.Received != 1 {
		t.Errorf("flow control: data_blocked %+v max_data %+v", c.DataBlocked, c.MaxData)
	}
	if len(c.Streams) != 2 {
		t.Fatalf("streams %+v", c.Streams)
	}
	s4 := c.Streams[1]
	if s4.ID != 4 || s4.Request != 60 || s4.First != 62 || s4.Last != 200 || s4.Bytes != 2000 || s4.Priority != "u=4, i" {
		t.Errorf("stream 4: %+v", s4)
	}
	first, last, end, conc, ttfb := c.Load()
	if first != 50 || last != 60 || end != 200 || conc != 2 || ttfb != 2 {
		t.Errorf("load: first %v last %v end %v concurrency %d ttfb %v", first, last, end, conc, ttfb)
	}
	if c.Duration != 900 || c.LoadEnd != 0 {
		t.Errorf("duration %v, load end %v", c.Duration, c.LoadEnd)
	}
}

// TestReadLoadOnly: the dead peer's tail (after the last response) is left
// out.
func TestReadLoadOnly(t *testing.T) {
	c := readOne(t, serverLog, ReadOptions{LoadOnly: true})
	if c.LoadEnd != 200 || c.Duration != 200 {
		t.Errorf("load end %v, duration %v: want 200", c.LoadEnd, c.Duration)
	}
	if c.PTOs != 1 || c.Lost != 3 || c.CwndMin != 20480 || c.PacketsReceived != 3 {
		t.Errorf("load only: PTOs %d (want 1), lost %d (want 3), cwnd min %d (want 20480), received %d (want 3)", c.PTOs, c.Lost, c.CwndMin, c.PacketsReceived)
	}
}

// clientLog is a neqo-style client trace: qlog 0.3 with a numeric
// reference time, packets discarded for a packet number overlap, and a
// last record cut short (a killed browser).
var clientLog = seq(
	`{"qlog_version":"0.3","qlog_format":"JSON-SEQ","title":"Firefox Client qlog","trace":{"vantage_point":{"name":"neqo-Client","type":"client"},"common_fields":{"reference_time":1795803348651.5,"time_format":"relative"}}}`,
	`{"time":10,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":2},"raw":{"length":300},"frames":[{"frame_type":"stream","stream_id":0,"offset":0,"length":280,"fin":true}]}}`,
	`{"time":40,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","packet_number":10},"raw":{"length":1280},"frames":[{"frame_type":"stream","stream_id":0,"offset":0,"length":1200,"fin":true}]}}`,
	`{"time":41,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","packet_number":3},"raw":{"length":40},"frames":[{"frame_type":"ack","ack_delay":0.1,"acked_ranges":[[10,10]]}]}}`,
	`{"time":450.4,"name":"transport:packet_dropped","data":{"header":{"packet_type":"1RTT"},"raw":{"length":1280},"details":"packet number overlap","trigger":"decryption_failure"}}`,
	`{"time":537.2,"name":"transport:packet_dropped","data":{"header":{"packet_type":"1RTT"},"raw":{"length":1280},"details":"packet number overlap","trigger":"decryption_failure"}}`,
	`{"time":538,"name":"transport:packet_dropped","data":{"header":{"packet_type":"initial"},"raw":{"length":40},"trigger":"decryption_failure"}}`,
	`{"time":540,"name":"recovery:metrics_updated","data":{"pto_count":1,"congestion_window":12520,"pacing_rate":1000000}}`,
	`{"time":541,"name":"transport:packet_rec`,
)

func TestReadClientLog(t *testing.T) {
	c := readOne(t, clientLog, ReadOptions{})
	if c.Vantage != "client" || !c.Truncated {
		t.Errorf("vantage %q, truncated %v", c.Vantage, c.Truncated)
	}
	if want := time.UnixMicro(1795803348651500); !c.Start.Equal(want) {
		t.Errorf("start %v, want %v", c.Start, want)
	}
	// The Initial packet's drop is counted, not timed.
	if c.Dropped["packet number overlap"] != 2 || c.Dropped["decryption_failure"] != 1 || c.DroppedFirst != 450.4 || c.DroppedLast != 537.2 {
		t.Errorf("dropped %v from %v to %v", c.Dropped, c.DroppedFirst, c.DroppedLast)
	}
	if c.PTOs != 1 || c.PacingRate != 1000000 || c.AcksSent != 1 || c.AckElicitingReceived != 1 {
		t.Errorf("PTOs %d pacing %d acks sent %d eliciting received %d", c.PTOs, c.PacingRate, c.AcksSent, c.AckElicitingReceived)
	}
	// At a client, requests go out and responses come in.
	if len(c.Streams) != 1 || c.Streams[0].Request != 10 || c.Streams[0].First != 40 || c.Streams[0].Bytes != 1200 {
		t.Errorf("streams %+v", c.Streams)
	}
}

// TestReadJSON: aioquic's JSON form, several traces.
func TestReadJSON(t *testing.T) {
	text := `{"qlog_format":"JSON","qlog_version":"0.3","traces":[
	{"vantage_point":{"type":"server"},"common_fields":{"ODCID":"aa"},"events":[{"time":5,"name":"recovery:packet_lost","data":{}},{"time":6,"name":"recovery:metrics_updated","data":{"congestion_window":14520}}]},
	{"vantage_point":{"type":"server"},"common_fields":{"ODCID":"bb"},"events":[]}]}`
	cs, err := Read(strings.NewReader(text), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 2 || cs[0].ODCID != "aa" || cs[0].Lost != 1 || cs[0].CwndMax != 14520 || cs[1].ODCID != "bb" {
		t.Errorf("%+v", cs)
	}
}

func TestReadErrors(t *testing.T) {
	for _, text := range []string{"", "hello", "\x1e\n", `{"traces":[]}`, "\x1enot json\n"} {
		if _, err := Read(strings.NewReader(text), ReadOptions{}); !errors.Is(err, ErrNotQlog) {
			t.Errorf("%q: %v, want ErrNotQlog", text, err)
		}
	}
	// A bad record before the end is an error, not a truncation.
	bad := seq(`{"title":"x","trace":{"vantage_point":{"type":"server"}}}`, `{"time":1,`, `{"time":2,"name":"a","data":{}}`)
	if _, err := Read(strings.NewReader(bad), ReadOptions{}); err == nil || !strings.Contains(err.Error(), "record 2 ") {
		t.Errorf("bad middle record: %v", err)
	}
}

// netLog is a NetLog with one QUIC session of the shape Chromium 156
// writes, and an unrelated source.
const netLog = `{"constants":{"timeTickOffset":"1795801320802","logEventTypes":{"QUIC_SESSION":1,"QUIC_SESSION_PACKET_SENT":2,"QUIC_SESSION_PACKET_RECEIVED":3,"QUIC_SESSION_ACK_FRAME_SENT":4,
"QUIC_SESSION_TRANSPORT_PARAMETERS_SENT":5,"QUIC_SESSION_TRANSPORT_PARAMETERS_RECEIVED":6,"QUIC_CONGESTION_CONTROL_CONFIGURED":7,"HTTP3_HEADERS_SENT":8,
"QUIC_SESSION_STREAM_FRAME_RECEIVED":9,"QUIC_SESSION_WINDOW_UPDATE_FRAME_SENT":10,"QUIC_SESSION_KEY_UPDATE":11,"QUIC_SESSION_PACKET_LOST":12,"REQUEST_ALIVE":13,
"QUIC_SESSION_BUFFERED_UNDECRYPTABLE_PACKET":14,"QUIC_SESSION_DROPPED_UNDECRYPTABLE_PACKET":15},
"logSourceType":{"QUIC_SESSION":5,"URL_REQUEST":1}},
"events":[
{"time":"1000","type":1,"phase":1,"source":{"id":7,"type":5},"params":{"connection_id":"39ee06d563e30690"}},
{"time":"1000","type":7,"phase":0,"source":{"id":7,"type":5},"params":{"congestion_control_type":"CUBIC_BYTES"}},
{"time":"1001","type":5,"phase":0,"source":{"id":7,"type":5},"params":{"quic_transport_parameters":"[Client max_idle_timeout 30000 initial_max_data 15728640 initial_max_stream_data_bidi_local 6291456 max_ack_delay 25]"}},
{"time":"1001","type":2,"phase":0,"source":{"id":7,"type":5},"params":{"size":1250}},
{"time":"1002","type":14,"phase":0,"source":{"id":7,"type":5},"params":{}},
{"time":"1003","type":15,"phase":0,"source":{"id":7,"type":5},"params":{}},
{"time":"1020","type":3,"phase":0,"source":{"id":7,"type":5},"params":{"size":1280}},
{"time":"1021","type":6,"phase":0,"source":{"id":7,"type":5},"params":{"quic_transport_parameters":"[Server initial_max_data 33554432 initial_max_stream_data_bidi_local 16777216]"}},
{"time":"1030","type":8,"phase":0,"source":{"id":7,"type":5},"params":{"stream_id":0}},
{"time":"1060","type":9,"phase":0,"source":{"id":7,"type":5},"params":{"stream_id":0,"offset":0,"length":1200,"fin":false}},
{"time":"1062","type":9,"phase":0,"source":{"id":7,"type":5},"params":{"stream_id":3,"offset":0,"length":10,"fin":false}},
{"time":"1070","type":9,"phase":0,"source":{"id":7,"type":5},"params":{"stream_id":0,"offset":1200,"length":300,"fin":true}},
{"time":"1071","type":4,"phase":0,"source":{"id":7,"type":5},"params":{}},
{"time":"1080","type":10,"phase":0,"source":{"id":7,"type":5},"params":{"stream_id":-1,"byte_offset":15728640}},
{"time":"1081","type":10,"phase":0,"source":{"id":7,"type":5},"params":{"stream_id":0,"byte_offset":6291456}},
{"time":"1090","type":11,"phase":0,"source":{"id":7,"type":5},"params":{}},
{"time":"1095","type":12,"phase":0,"source":{"id":7,"type":5},"params":{}},
{"time":"1100","type":13,"phase":0,"source":{"id":9,"type":1},"params":{}}
]}`

func TestReadNetLog(t *testing.T) {
	cs, err := ReadNetLog(strings.NewReader(netLog), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 {
		t.Fatalf("%d sessions, want 1", len(cs))
	}
	c := cs[0]
	if c.ODCID != "39ee06d563e30690" || c.CCAlgo != "CUBIC_BYTES" || c.Vantage != "client" {
		t.Errorf("session: %q %q %q", c.ODCID, c.CCAlgo, c.Vantage)
	}
	if want := time.UnixMicro((1795801320802 + 1000) * 1000); !c.Start.Equal(want) {
		t.Errorf("start %v, want %v", c.Start, want)
	}
	if c.Local.MaxData != 15728640 || c.Local.MaxStreamDataBidiLoc != 6291456 || c.Local.MaxAckDelay != 25 || c.Remote.MaxData != 33554432 {
		t.Errorf("params local %+v remote %+v", c.Local, c.Remote)
	}
	if c.PacketsSent != 1 || c.BytesSent != 1250 || c.PacketsReceived != 1 || c.AcksSent != 1 || c.Lost != 1 ||
		c.MaxData.Sent != 1 || c.MaxStreamData.Sent != 1 || len(c.KeyUpdates) != 1 || c.KeyUpdates[0] != 90 ||
		len(c.Dropped) != 1 || c.Dropped["dropped_undecryptable_packet"] != 1 {
		t.Errorf("figures: %+v", c)
	}
	if len(c.Streams) != 1 || c.Streams[0].Request != 30 || c.Streams[0].First != 60 || c.Streams[0].Last != 70 || c.Streams[0].Bytes != 1500 {
		t.Errorf("streams %+v", c.Streams)
	}
	lc, err := ReadNetLog(strings.NewReader(netLog), ReadOptions{LoadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if lc[0].LoadEnd != 70 || lc[0].Lost != 0 || lc[0].AcksSent != 0 {
		t.Errorf("load only: end %v lost %d acks %d", lc[0].LoadEnd, lc[0].Lost, lc[0].AcksSent)
	}
	if _, err := ReadNetLog(strings.NewReader(`{"constants":{}}`), ReadOptions{}); !errors.Is(err, ErrNotNetLog) {
		t.Errorf("no constants: %v", err)
	}
	if _, err := ReadNetLog(strings.NewReader(netLog[:200]), ReadOptions{}); !errors.Is(err, ErrNotNetLog) {
		t.Errorf("cut short: %v", err)
	}
}

func TestAttachAndFigures(t *testing.T) {
	base := time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC)
	samples := []Sample{
		{Key: "a/h3", Iteration: 0, Start: base, End: base.Add(5 * time.Second)},
		{Key: "b/h3", Iteration: 0, Start: base.Add(10 * time.Second), End: base.Add(15 * time.Second)},
	}
	srv := readOne(t, serverLog, ReadOptions{LoadOnly: true})
	srv.Start = base.Add(2 * time.Second)
	cli := readOne(t, clientLog, ReadOptions{})
	cli.Start = base.Add(11 * time.Second)
	stray := readOne(t, serverLog, ReadOptions{})
	stray.Start = base.Add(7 * time.Second) // between the samples
	loads, left := Attach([]*Conn{cli, stray, srv}, samples)
	if len(left) != 1 || left[0] != stray {
		t.Errorf("left over: %v", left)
	}
	if len(loads) != 2 || loads[0].Sample.Key != "a/h3" || loads[0].Conns[0] != srv || loads[1].Sample.Key != "b/h3" || loads[1].Source != "client Firefox Client qlog" {
		t.Fatalf("loads: %+v", loads)
	}
	f := loads[0].Figures()
	if f["conns"] != 1 || f["lost"] != 3 || f["loss_burst"] != 3 || f["ptos"] != 1 || f["key_updates"] != 1 ||
		f["peer_max_data"] != 25165824 || f["load_end_ms"] != 200 || f["concurrency"] != 2 || f["cwnd_min"] != 20480 {
		t.Errorf("figures %v", f)
	}
	if g := loads[1].Figures(); g["dropped"] != 3 || g["pn_overlap"] != 2 || math.Abs(g["dropped_span_ms"]-86.8) > 1e-9 {
		t.Errorf("client figures %v", g)
	}
	// The server updated its keys at 80 ms after 18:00:02; the client's
	// first 1-RTT discard was at 450.4 ms after 18:00:11 (set above).
	if lag, ok := DiscardLag(loads[0], loads[1]); !ok || math.Abs(lag-(9000+450.4-80)) > 1e-6 {
		t.Errorf("discard lag %v %v", lag, ok)
	}
	if _, ok := DiscardLag(loads[1], loads[0]); ok {
		t.Error("discard lag without a key update in the first log or a discard in the second")
	}
	sum := Summarize([]*Load{loads[0], loads[0], {Conns: []*Conn{cli}}})
	if s := sum["lost"]; s.N != 3 || s.Median != 3 || s.Min != 0 || s.Nonzero != 2 || s.String() != "3 [1.5, 3]" {
		t.Errorf("summary of lost: %+v %s", s, s)
	}
}
