package program

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

// goodRecord is a record of two requests over one connection, as client.py
// prints it.
func goodRecord() map[string]any {
	return map[string]any{
		"version":         "aioquic 1.7.2",
		"config":          map[string]any{"congestion_control": "cubic", "max_datagram_size": 1452, "rcvbuf_bytes": 8388608},
		"started_unix_ns": 1700000000000000000,
		"cpu_start":       map[string]any{"user_ns": 100e6, "sys_ns": 20e6},
		"measure_start":   1000, "measure_end": 90000,
		"conns": []any{map[string]any{
			"local": "10.1.1.2:5000", "remote": "10.1.2.2:4433", "start": 10, "connected": 500, "handshake": 500, "closed": 95000, "requests": 2,
			"negotiated": map[string]any{"ALPN": "h3", "HTTPVersion": "HTTP/3.0", "TLSVersion": "TLS 1.3", "Cipher": "TLS_AES_128_GCM_SHA256", "QUICVersion": "v1"},
			"transport":  map[string]any{"Kind": "quic", "Side": "client", "CongestionAlgo": "cubic", "SmoothedRTTms": 20.5, "CwndBytes": 14520, "PacketsSent": 40, "PacketsLost": 2, "PTOCount": 1, "CongestionStateChanges": -1, "latest_rtt_ms": 21.0},
		}},
		"requests": []any{
			map[string]any{"path": "/bytes/300", "conn": 0, "status": 200, "start": 1000, "sent": 1100, "first_byte": 2000, "end": 3000, "bytes": 300, "chunks": [][2]int64{{2500, 100}, {3000, 200}}},
			map[string]any{"path": "/bytes/300", "conn": 0, "status": 200, "start": 4000, "sent": 4100, "first_byte": 5000, "end": 6000, "bytes": 300, "chunks": [][2]int64{{6000, 300}}},
		},
	}
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseGoodRecord(t *testing.T) {
	fr, extra, err := parse("aioquic", marshal(t, goodRecord()), 2, endpoint.CPUTime{User: 300 * time.Millisecond, Sys: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Conns) != 1 || len(fr.Requests) != 2 || fr.Bytes != 600 || fr.Proto != model.ProtoH3 {
		t.Fatalf("result %+v", fr)
	}
	c := fr.Conns[0]
	if c.Negotiated.ALPN != "h3" || c.Transport.Kind != "quic" || c.Transport.SmoothedRTTms != 20.5 || c.Transport.PacketsLost != 2 || c.Transport.CongestionStateChanges != model.NotMeasured {
		t.Fatalf("connection %+v", c)
	}
	if fr.Negotiated != c.Negotiated || fr.MeasureStart != 1000 || fr.MeasureEnd != 90000 {
		t.Fatalf("result %+v", fr)
	}
	if got := fr.Requests[0].Chunks; len(got) != 2 || got[1] != (endpoint.Chunk{T: 3000, Bytes: 200}) {
		t.Fatalf("chunks %+v", got)
	}
	// the interpreter's start (cpu_start) is not the sample's
	if fr.CPU.ClientUser != 200*time.Millisecond || fr.CPU.ClientSys != 30*time.Millisecond {
		t.Fatalf("CPU %+v", fr.CPU)
	}
	if extra["client_rcvbuf_bytes"] != 8388608 || extra["client_max_datagram_bytes"] != 1452 {
		t.Fatalf("extra %v", extra)
	}
	if refs := fr.ConnRefs(); len(refs) != 1 || refs[0] != (endpoint.ConnRef{Kind: "quic", Addr: "10.1.1.2:5000"}) {
		t.Fatalf("conn refs %+v", refs)
	}
}

func TestParseRejectsMalformedRecords(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
		raw  string
		want string
	}{
		{name: "not JSON", raw: "Traceback (most recent call last):", want: "not a record"},
		{name: "empty", raw: "", want: "not a record"},
		{name: "two records", raw: `{"version":"aioquic 1.7.2"} {}`, want: "more than one record"},
		{name: "no version", edit: func(m map[string]any) { delete(m, "version") }, want: "no version"},
		{name: "wrong type", edit: func(m map[string]any) { m["requests"] = "none" }, want: "not a record"},
		{name: "missing request", edit: func(m map[string]any) { m["requests"] = m["requests"].([]any)[:1] }, want: "1 requests in a record without error, want 2"},
		{name: "no connection", edit: func(m map[string]any) { m["conns"] = []any{} }, want: "connection 0 of 0"},
		{name: "no transport", edit: func(m map[string]any) { delete(m["conns"].([]any)[0].(map[string]any), "transport") }, want: "no QUIC transport statistics"},
		{name: "no handshake", edit: func(m map[string]any) { delete(m["conns"].([]any)[0].(map[string]any), "handshake") }, want: "no local address or handshake time"},
		{name: "chunks disagree", edit: func(m map[string]any) { m["requests"].([]any)[0].(map[string]any)["bytes"] = 301 }, want: "chunks sum to 300 bytes, the request counts 301"},
		{name: "bad connection index", edit: func(m map[string]any) { m["requests"].([]any)[1].(map[string]any)["conn"] = 3 }, want: "request 1: connection 3 of 1"},
		{name: "end before start", edit: func(m map[string]any) { m["requests"].([]any)[1].(map[string]any)["end"] = 10 }, want: "ends at 10 ns before its start"},
		{name: "incomplete request", edit: func(m map[string]any) { m["requests"].([]any)[1].(map[string]any)["end"] = 0 }, want: "incomplete in a record without error"},
		{name: "negative time", edit: func(m map[string]any) { m["measure_end"] = -1 }, want: "measured part"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.raw)
			if tc.edit != nil {
				m := goodRecord()
				tc.edit(m)
				b = marshal(t, m)
			}
			fr, _, err := parse("aioquic", b, 2, endpoint.CPUTime{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if fr != nil {
				t.Fatalf("a malformed record gave a result: %+v", fr)
			}
		})
	}
}

func TestParseFailureKeepsWhatWasMeasured(t *testing.T) {
	m := goodRecord()
	m["error"] = "h3 /bytes/300: timeout (idle, 10s without progress)"
	r := m["requests"].([]any)[1].(map[string]any)
	r["end"], r["error"] = 0, m["error"]
	fr, _, err := parse("aioquic", marshal(t, m), 2, endpoint.CPUTime{})
	if err == nil || !strings.Contains(err.Error(), "timeout (idle") {
		t.Fatalf("error %v", err)
	}
	if fr == nil || len(fr.Requests) != 2 || fr.Requests[1].Error == "" {
		t.Fatalf("result %+v", fr)
	}
}

func TestParseALPNMismatchIsInvalid(t *testing.T) {
	m := goodRecord()
	m["conns"].([]any)[0].(map[string]any)["negotiated"].(map[string]any)["ALPN"] = "h3-29"
	_, _, err := parse("aioquic", marshal(t, m), 2, endpoint.CPUTime{})
	var mm *endpoint.MismatchError
	if !errors.As(err, &mm) || mm.Got != "h3-29" {
		t.Fatalf("error %v, want a MismatchError", err)
	}
}

func TestRequestFromSpec(t *testing.T) {
	req := workload.Request{Target: workload.Target{Host: "10.1.2.2", Port: 4433, CAPEM: "PEM"}}
	c := &Client{Name: "aioquic", CC: peers.CC{QUIC: []string{"cubic", "reno"}, QUICDefault: "cubic"}}
	in, want, err := c.request(req, endpoint.FetchSpec{Proto: model.ProtoH3, Paths: []string{"/echo"}, Repeat: 5, Warm: true})
	if err != nil {
		t.Fatal(err)
	}
	if want != 5 || in.Repeat != 5 || in.Parallel != 1 || !in.Warm || in.CAPEM != "PEM" ||
		in.RcvBuf != DefaultRcvBuf || in.CongestionCtl != "cubic" || in.MaxDatagramSize != 1452 ||
		in.Timeout != endpoint.DefaultTimeout.Seconds() || in.IdleTimeout != endpoint.DefaultIdleTimeout.Seconds() {
		t.Fatalf("request %+v", in)
	}
	if in, _, _ := (&Client{Name: "aioquic", RcvBuf: -1}).request(req, endpoint.FetchSpec{Proto: model.ProtoH3, Paths: []string{"/echo"}}); in.RcvBuf != 0 {
		t.Fatalf("RcvBuf -1 asked for %d bytes, want the kernel's default (0)", in.RcvBuf)
	}
	for _, spec := range []endpoint.FetchSpec{
		{Proto: model.ProtoH2, Paths: []string{"/echo"}},
		{Proto: model.ProtoH3, Paths: []string{"/echo"}, ZeroRTT: true},
		{Proto: model.ProtoH3, Paths: []string{"/"}, Page: true},
		{Proto: model.ProtoH3},
	} {
		if _, _, err := c.request(req, spec); err == nil {
			t.Errorf("spec %+v accepted", spec)
		}
	}
	if _, _, err := c.request(workload.Request{}, endpoint.FetchSpec{Proto: model.ProtoH3, Paths: []string{"/echo"}}); err == nil {
		t.Error("a request without target accepted")
	}
}

func TestFetchWithoutProgramFails(t *testing.T) {
	req := workload.Request{Target: workload.Target{Host: "10.1.2.2", Port: 4433}}
	_, _, err := (&Client{Name: "aioquic"}).Fetch(t.Context(), req, endpoint.FetchSpec{Proto: model.ProtoH3, Paths: []string{"/echo"}})
	if err == nil || !strings.Contains(err.Error(), "aioquic client: no program") {
		t.Fatalf("error %v", err)
	}
}

func TestCappedBuffer(t *testing.T) {
	head := &capped{max: 4}
	head.Write([]byte("abc"))
	head.Write([]byte("def"))
	if head.String() != "abcd" || !head.over {
		t.Fatalf("head %q over %v", head.String(), head.over)
	}
	tail := &capped{max: 4, tail: true}
	tail.Write([]byte("abc"))
	tail.Write([]byte("def"))
	if tail.String() != "cdef" {
		t.Fatalf("tail %q", tail.String())
	}
}
