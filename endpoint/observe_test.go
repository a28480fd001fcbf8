package endpoint

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

// syncBuffer is a goroutine-safe bytes.Buffer.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestKeyLogAndQlog(t *testing.T) {
	var serverKeys, clientKeys syncBuffer
	serverQlog, clientQlog := t.TempDir(), t.TempDir()
	srv, pool := testServer(t, ServerConfig{KeyLog: &serverKeys, QlogDir: serverQlog})
	for _, proto := range []string{model.ProtoH2, model.ProtoH3} {
		spec := specFor(srv, pool, proto, "/bytes/10000")
		spec.KeyLog, spec.QlogDir = &clientKeys, clientQlog
		if _, err := Fetch(context.Background(), spec); err != nil {
			t.Fatal(err)
		}
	}
	srv.Close() // flushes the server's qlog files
	for name, keys := range map[string]string{"server": serverKeys.String(), "client": clientKeys.String()} {
		// Two TLS 1.3 connections (TCP and QUIC): two sets of secrets.
		if n := strings.Count(keys, "CLIENT_TRAFFIC_SECRET_0 "); n != 2 {
			t.Errorf("%s key log has %d CLIENT_TRAFFIC_SECRET_0 lines, want 2:\n%s", name, n, keys)
		}
	}
	for dir, role := range map[string]string{serverQlog: "server", clientQlog: "client"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*_"+role+".sqlog"))
		if len(files) != 1 {
			t.Fatalf("%s qlog files: %v", role, files)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`"transport:packet_sent"`)) || !bytes.Contains(b, []byte(`"vantage_point"`)) {
			t.Errorf("%s qlog lacks events (%d bytes)", role, len(b))
		}
	}
}

func TestCongestionControlIsSetAndRecorded(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{CongestionControl: "cubic"})
	spec := specFor(srv, pool, model.ProtoH2, "/bytes/100000")
	spec.CongestionControl = "reno"
	res, err := Fetch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Conns[0].Transport.CongestionAlgo; got != "reno" {
		t.Errorf("client congestion control %q, want reno", got)
	}
	st, err := srv.ConnStats(context.Background(), "tcp", res.Conns[0].Local)
	if err != nil {
		t.Fatal(err)
	}
	if st.CongestionAlgo != "cubic" {
		t.Errorf("server congestion control %q, want cubic", st.CongestionAlgo)
	}
	spec.CongestionControl = "nosuch"
	if _, err := Fetch(context.Background(), spec); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("unknown client algorithm: %v", err)
	}
	if _, err := StartServer(context.Background(), ServerConfig{Host: "127.0.0.1", CongestionControl: "nosuch"}); err == nil || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("unknown server algorithm: %v", err)
	}
}

func TestNoQUICEventsStillMeasures(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{NoQUICEvents: true})
	spec := specFor(srv, pool, model.ProtoQUIC, "/bytes/100000")
	spec.NoQUICEvents = true
	res, err := Fetch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, res, model.ProtoQUIC)
}

func TestFetchLeavesNoGoroutines(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	// One fetch per protocol first: lazily started package goroutines
	// (quic-go, net/http) belong to the baseline.
	run := func() {
		for _, proto := range model.Protocols {
			spec := specFor(srv, pool, proto, "/bytes/100000", "/echo")
			spec.Parallel = 2
			if _, err := Fetch(context.Background(), spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	run()
	base := stableGoroutines()
	run()
	if n := settledGoroutines(base); n > base {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines after fetching, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// stableGoroutines returns the goroutine count once it stopped changing
// for three polls 50 ms apart (or after 5 s).
func stableGoroutines() int {
	n, same := runtime.NumGoroutine(), 0
	for i := 0; i < 100 && same < 3; i++ {
		time.Sleep(50 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}

// settledGoroutines waits (up to 5 s) for the goroutine count to drop to
// target, and returns the count.
func settledGoroutines(target int) int {
	n := runtime.NumGoroutine()
	for i := 0; i < 100 && n > target; i++ {
		time.Sleep(50 * time.Millisecond)
		n = runtime.NumGoroutine()
	}
	return n
}
