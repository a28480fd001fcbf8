package endpoint

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

// These tests run the endpoints across the emulated link of a real testbed,
// each in a process of its own inside its namespace, as quicbench run does:
// the server and the client as re-executed test binaries. Neither may run
// in this process, which hosts the emulator: its forwarding threads keep
// their Go scheduler slots while they sleep, and timer-driven code sharing
// the process (quic-go's pacing and acknowledgement timers) then stalls for
// milliseconds at a time (measured: h3 at 15 Mbit/s instead of 1.2 Gbit/s).

const (
	helperEnv      = "QB_ENDPOINT_FETCH_HELPER"
	serveHelperEnv = "QB_ENDPOINT_SERVE_HELPER"
)

// TestServeHelperProcess is not a test: it is the server process of the
// testbed tests, run inside the server namespace and controlled over its
// standard input and output (ServeControl) until its input ends.
func TestServeHelperProcess(t *testing.T) {
	host := os.Getenv(serveHelperEnv)
	if host == "" {
		t.Skip("helper process for the testbed tests")
	}
	srv, err := StartServer(context.Background(), ServerConfig{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := ServeControl(context.Background(), srv, os.Stdin, os.Stdout); err != nil {
		t.Fatal(err)
	}
}

// helperJob is what the helper process fetches.
type helperJob struct {
	Spec  FetchSpec // RootCAs and writers are not transferable
	CAPEM string
	Out   string // file receiving the FetchResult as JSON
}

// TestFetchHelperProcess is not a test: it is the client process of the
// testbed tests, run inside the client namespace.
func TestFetchHelperProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("helper process for the testbed tests")
	}
	var job helperJob
	if err := json.Unmarshal([]byte(raw), &job); err != nil {
		t.Fatal(err)
	}
	pool, err := certs.PoolFromPEM([]byte(job.CAPEM))
	if err != nil {
		t.Fatal(err)
	}
	job.Spec.RootCAs = pool
	res, err := Fetch(context.Background(), job.Spec)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	b, _ := json.Marshal(res)
	if err := os.WriteFile(job.Out, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

type testbedRig struct {
	tb   *netns.Testbed
	info ServerInfo // of the server process
	ctl  *ControlClient
}

// newTestbedRig builds a testbed with link in both directions and starts
// quicbench's server in its server namespace.
func newTestbedRig(t testing.TB, link string) *testbedRig {
	t.Helper()
	testsupport.RequireRoot(t, "needs root (network namespaces)")
	if testing.Short() {
		t.Skip("testbed test skipped in -short mode")
	}
	l, err := spec.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	tb, err := netns.New(context.Background(), netns.Config{Name: "qbep" + hex.EncodeToString(id), Up: l, Down: l, Seed: 1, CC: "cubic"})
	if err != nil {
		t.Fatalf("testbed: %v", err)
	}
	t.Cleanup(func() {
		if err := tb.Close(); err != nil {
			t.Errorf("closing testbed: %v", err)
		}
	})
	r := &testbedRig{tb: tb}
	cmd := tb.Command(context.Background(), netns.Server, os.Args[0], "-test.run=^TestServeHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), serveHelperEnv+"="+tb.Addr(netns.Server).String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("server process in the server namespace: %v", err)
	}
	// Registered before the testbed's Close: cleanups run last first.
	t.Cleanup(func() {
		stdin.Close() // ends ServeControl, then the process
		if err := cmd.Wait(); err != nil {
			t.Errorf("server process: %v", err)
		}
	})
	r.ctl = NewControlClient(stdout, stdin)
	if r.info, err = r.ctl.Ready(); err != nil {
		t.Fatalf("server process: %v", err)
	}
	return r
}

// fetch runs spec in the client namespace.
func (r *testbedRig) fetch(t testing.TB, s FetchSpec) *FetchResult {
	t.Helper()
	host := r.tb.Addr(netns.Server).String()
	s.Addr = net.JoinHostPort(host, strconv.Itoa(r.info.Port))
	if s.Proto == model.ProtoH1C {
		s.Addr = net.JoinHostPort(host, strconv.Itoa(r.info.PlainPort))
	}
	out := filepath.Join(t.TempDir(), "result.json")
	job, _ := json.Marshal(helperJob{Spec: s, CAPEM: r.info.CAPEM, Out: out})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := r.tb.Command(ctx, netns.Client, os.Args[0], "-test.run=^TestFetchHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(job))
	var combined bytes.Buffer
	cmd.Stdout, cmd.Stderr = &combined, &combined
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s fetch in the client namespace: %v\n%s", s.Proto, err, combined.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("helper wrote no result: %v\n%s", err, combined.String())
	}
	var res FetchResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	return &res
}

// TestHandshakeRoundTripsAcrossTheLink checks the handshake arithmetic over
// a 50 ms RTT link: time from connection start to the first response byte
// of a small request is ~3 RTT for h2 (TCP handshake, TLS 1.3 handshake,
// request), ~2 RTT for h3 (QUIC handshake, request) and ~1 RTT for h3 with
// 0-RTT. Bounds are generous: this is physics, not performance.
func TestHandshakeRoundTripsAcrossTheLink(t *testing.T) {
	r := newTestbedRig(t, "delay 25ms")
	const rtt = 50 * time.Millisecond
	ttfb := func(proto string, zero bool) time.Duration {
		var all []time.Duration
		for range 3 {
			res := r.fetch(t, FetchSpec{Proto: proto, Paths: []string{"/echo"}, ZeroRTT: zero})
			if res.Negotiated.ALPN != expectedALPN[proto] || res.Negotiated.ZeroRTT != zero {
				t.Fatalf("%s: negotiated %+v", proto, res.Negotiated)
			}
			c, q := res.Conns[0], res.Requests[0]
			all = append(all, time.Duration(q.FirstByte-c.Start))
		}
		slices.Sort(all)
		t.Logf("%s (0-RTT %v): connection start to first byte %v (median of %v)", proto, zero, all[1], all)
		return all[1]
	}
	h2, h3, h3zero, h1 := ttfb(model.ProtoH2, false), ttfb(model.ProtoH3, false), ttfb(model.ProtoH3, true), ttfb(model.ProtoH1, false)
	within := func(name string, got time.Duration, lo, hi float64) {
		t.Helper()
		if got < time.Duration(lo*float64(rtt)) || got > time.Duration(hi*float64(rtt)) {
			t.Errorf("%s = %v, want between %.1f and %.1f RTT (%v)", name, got, lo, hi, rtt)
		}
	}
	within("h2 fresh", h2, 2.9, 4)
	within("h1 fresh", h1, 2.9, 4)
	within("h3 fresh", h3, 1.9, 3)
	within("h3 0-RTT", h3zero, 0.9, 2)
	within("h2 - h3", h2-h3, 0.5, 1.5)
	within("h3 - h3 0-RTT", h3-h3zero, 0.5, 1.5)
}

// BenchmarkGoodputAcrossTestbed measures each protocol's goodput over the
// testbed's unimpaired emulated link (one fresh connection downloading
// 64 MiB per iteration), to set next to `quicbench calibrate --throughput`.
func BenchmarkGoodputAcrossTestbed(b *testing.B) {
	r := newTestbedRig(b, "")
	for _, proto := range model.Protocols {
		b.Run(proto, func(b *testing.B) {
			var ns, bytes int64
			for b.Loop() {
				res := r.fetch(b, FetchSpec{Proto: proto, Paths: []string{"/bytes/64MiB"}})
				ns += res.MeasureEnd - res.MeasureStart
				bytes += res.Bytes
			}
			b.ReportMetric(float64(bytes)*8/(float64(ns)/1e9)/1e6, "Mbit/s")
		})
	}
}
