package endpoint

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

// TestConnLog: the server reports each TLS connection's open, with what its
// handshake did, and its close, over TCP and QUIC. A fetch that primes a
// session ticket and then resumes (h2), or resumes with 0-RTT (h3), shows
// a full handshake, then a resumed one (with 0-RTT over QUIC); ConnLog
// writes the events as JSON lines.
func TestConnLog(t *testing.T) {
	var mu sync.Mutex
	var events []ConnEvent
	var logged bytes.Buffer
	jsonLog := ConnLog(&logged)
	srv, pool := testServer(t, ServerConfig{OnConn: func(e ConnEvent) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
		jsonLog(e)
	}})
	for _, c := range []struct {
		proto, kind string
		zeroRTT     bool
	}{{model.ProtoH2, "tcp", false}, {model.ProtoH3, "quic", true}} {
		mu.Lock()
		events = nil
		mu.Unlock()
		spec := specFor(srv, pool, c.proto, "/echo")
		spec.Resume, spec.ZeroRTT = true, c.zeroRTT
		res, err := Fetch(context.Background(), spec)
		if err != nil {
			t.Fatalf("%s: %v", c.proto, err)
		}
		// The closes reach the server after the fetch returned.
		var got []ConnEvent
		for deadline := time.Now().Add(10 * time.Second); ; {
			mu.Lock()
			got = append(got[:0], events...)
			mu.Unlock()
			if len(got) >= 4 || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		var opens, closes []ConnEvent
		for _, e := range got {
			if e.Kind != c.kind || e.Remote == "" || e.Time.IsZero() {
				t.Errorf("%s: event %+v", c.proto, e)
			}
			switch e.Event {
			case "open":
				opens = append(opens, e)
			case "close":
				closes = append(closes, e)
			}
		}
		if len(opens) != 2 || len(closes) != 2 {
			t.Fatalf("%s: %d opens and %d closes, want 2 each: %+v", c.proto, len(opens), len(closes), got)
		}
		if opens[0].Resumed || opens[0].ZeroRTT || !opens[1].Resumed || opens[1].ZeroRTT != c.zeroRTT || opens[1].ALPN != c.proto {
			t.Errorf("%s: opens %+v (client negotiated %+v)", c.proto, opens, res.Negotiated)
		}
	}
	lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
	var first ConnEvent
	if len(lines) != 8 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.Event != "open" || first.Kind != "tcp" {
		t.Errorf("JSON log: %d lines, first %q", len(lines), lines[0])
	}
}
