package ngtcp2

import (
	"fmt"
	"strings"
	"testing"
)

// qlogOf builds an ngtcp2 qlog (JSON-SEQ) of the given event lines.
func qlogOf(vantage string, events ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\x1e{\"qlog_format\":\"JSON-SEQ\",\"qlog_version\":\"0.3\",\"trace\":{\"vantage_point\":{\"name\":\"ngtcp2\",\"type\":%q}}}\n", vantage)
	for _, e := range events {
		b.WriteString("\x1e" + e + "\n")
	}
	return b.String()
}

func cwndEvent(t, cwnd int) string {
	return fmt.Sprintf(`{"time":%d,"name":"recovery:metrics_updated","data":{"smoothed_rtt":20,"min_rtt":19,"rtt_variance":2,"congestion_window":%d,"bytes_in_flight":0,"pto_count":1}}`, t, cwnd)
}

// TestParseQlog reads a client's trace: the handshake, the request stream's
// first STREAM frame sent, its data received and FIN, the last metrics and
// the lost packets.
func TestParseQlog(t *testing.T) {
	tr, err := parseQlog(strings.NewReader(qlogOf("client",
		`{"time":3,"name":"transport:packet_sent","data":{"frames":[{"frame_type":"crypto","offset":0,"length":300}],"header":{"packet_type":"initial"},"raw":{"length":1200}}}`,
		`{"time":25,"name":"transport:packet_received","data":{"frames":[{"frame_type":"handshake_done"}],"raw":{"length":40}}}`,
		`{"time":25,"name":"transport:packet_sent","data":{"frames":[{"frame_type":"stream","stream_id":0,"offset":0,"length":30,"fin":true}],"raw":{"length":80}}}`,
		`{"time":47,"name":"transport:packet_received","data":{"frames":[{"frame_type":"stream","stream_id":0,"offset":0,"length":1000},{"frame_type":"stream","stream_id":3,"offset":0,"length":9}],"raw":{"length":1100}}}`,
		`{"time":48,"name":"recovery:packet_lost","data":{"header":{"packet_number":3},"raw":{"length":1200}}}`,
		`{"time":50,"name":"transport:packet_received","data":{"frames":[{"frame_type":"stream","stream_id":0,"offset":1000,"length":500,"fin":true}],"raw":{"length":600}}}`,
		cwndEvent(51, 14520),
		`{"time":52,"name":"transport:packet_sent","data":{"frames":[{"frame_type":"connection_close","error_code":0}],"raw":{"length":40}}}`,
		`{"time":53,"name":"transport:packet_s`, // cut short: the program was killed
	)))
	if err != nil {
		t.Fatal(err)
	}
	s := tr.streams[0]
	if tr.vantage != "client" || tr.handshake != 25 || !tr.closed || tr.sent != 3 || tr.lost != 1 || tr.lostBytes != 1200 ||
		s.firstSent != 25 || s.firstRecv != 47 || s.fin != 50 || s.recvBytes != 1500 || tr.cwnd != 14520 || tr.srtt != 20 {
		t.Fatalf("trace %+v, stream 0 %+v", tr, s)
	}
	if ids := tr.requestStreams(); len(ids) != 1 || ids[0] != 0 {
		t.Fatalf("request streams %v", ids)
	}
	got := chunks(s, tr.firstTime, 1400)
	if len(got) != 2 || got[0].Bytes+got[1].Bytes != 1400 || got[0].T != 44e6 {
		t.Fatalf("chunks %+v", got)
	}
	for _, bad := range []string{
		"",
		qlogOf("client"),
		qlogOf("client", `{"time":1,"name":"transport:packet_sent","data":{"frames":[{"frame_type":"stream","length":3}]}}`),
		qlogOf("client", `not json`, cwndEvent(2, 1000)),
	} {
		if _, err := parseQlog(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestFingerprint tells Cubic from NewReno by the window's reductions.
func TestFingerprint(t *testing.T) {
	series := func(cwnds ...int) *trace {
		var ev []string
		for i, c := range cwnds {
			ev = append(ev, cwndEvent(i, c))
		}
		tr, err := parseQlog(strings.NewReader(qlogOf("server", ev...)))
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	for _, c := range []struct {
		cwnds []int
		want  string
	}{
		{[]int{14520, 30000, 60000, 42000, 50000, 35000, 40000}, "cubic"},
		{[]int{14520, 30000, 60000, 30000, 40000, 20000}, "reno"},
		{[]int{14520, 30000, 60000, 120000}, ""},                            // nothing lost
		{[]int{14520, 60000, 2400, 9000}, ""},                               // persistent congestion only
		{[]int{14520, 60000, 52000, 60000, 54000}, ""},                      // neither's decrease
		{[]int{14520, 100000, 70000, 100000, 20000, 30000, 21000}, "cubic"}, // a collapse among Cubic's
	} {
		if got, _ := series(c.cwnds...).fingerprint(); got != c.want {
			t.Errorf("%v: %q, want %q", c.cwnds, got, c.want)
		}
	}
	if tr := series(14520, 30000, 15000); tr.transport("server", "cubic").CongestionAlgo != "reno" {
		t.Error("the configured algorithm overrode what the window shows")
	}
}
