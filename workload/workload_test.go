package workload

import (
	"context"
	"testing"
	"time"

	spec2 "github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

// startServer runs the real endpoint server on loopback.
func startServer(t *testing.T) Target {
	t.Helper()
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	info := srv.Info()
	return Target{Host: "127.0.0.1", Port: info.Port, PlainPort: info.PlainPort, CAPEM: info.CAPEM, SPKI: info.SPKI}
}

func TestEveryTestOverLoopback(t *testing.T) {
	target := startServer(t)
	cases := []struct {
		test   string
		protos []string
		params map[string]string
		want   []string // metrics that must be present and positive
	}{
		{plan.TestLatency, model.Protocols, map[string]string{"requests": "5"}, []string{"latency_ms", "latency_p95_ms"}},
		{plan.TestTTFB, model.Protocols, nil, []string{"ttfb_ms", "handshake_ms"}},
		{plan.TestHandshake, []string{"h1", "h2", "h3", "tcp", "quic"}, map[string]string{"mode": "full"}, []string{"handshake_ms"}},
		{plan.TestHandshake, []string{"h2", "h3"}, map[string]string{"mode": "resumed"}, []string{"handshake_ms"}},
		{plan.TestHandshake, []string{"h3"}, map[string]string{"mode": "0rtt"}, []string{"ttfb_ms"}},
		{plan.TestDownload, model.Protocols, map[string]string{"size": "200KB"}, []string{"goodput_mbps", "completion_ms"}},
		{plan.TestUpload, model.Protocols, map[string]string{"size": "100KB"}, []string{"goodput_mbps"}},
		{plan.TestMultiplex, []string{"h1", "h2", "h3"}, map[string]string{"objects": "4", "size": "50KB"}, []string{"span_ms", "finish_last_ms"}},
		{plan.TestStream, []string{"h2", "h3"}, map[string]string{"segments": "4", "interval": "5ms", "size": "2KB"}, []string{"interval_p95_ms"}},
		{plan.TestPage, []string{"h1", "h2", "h3"}, map[string]string{"objects": "5", "size": "4KB"}, []string{"plt_ms", "resources"}},
		{plan.TestCPU, []string{"h2", "h3"}, map[string]string{"size": "1MB"}, []string{"goodput_mbps"}},
	}
	var ex Executor
	for _, c := range cases {
		for _, proto := range c.protos {
			t.Run(c.test+"/"+proto+"/"+c.params["mode"], func(t *testing.T) {
				start := time.Now()
				res := ex.Execute(context.Background(), Request{
					Test: c.test, Protocol: proto, Params: testParams(c.test, c.params), Target: target, Timeout: 20 * time.Second,
				})
				took := time.Since(start)
				if res.Status != model.StatusOK {
					t.Fatalf("status %s: %s", res.Status, res.Error)
				}
				checkPrep(t, c.test, c.params, res, took)
				for _, m := range c.want {
					if v, ok := res.Metrics[m]; !ok || v <= 0 {
						t.Errorf("metric %s = %v (present %v), want > 0", m, v, ok)
					}
				}
				if len(res.Transport) == 0 {
					t.Error("no transport statistics")
				}
			})
		}
	}
}

// checkPrep checks a successful sample's unmeasured preparation: warm-up
// (latency) and priming (handshake resumed, 0rtt) come before the measured
// part, no other test prepares anything; the measured part and the
// preparation fit in the time the sample took.
func checkPrep(t *testing.T, test string, params map[string]string, res *Result, took time.Duration) {
	t.Helper()
	mode := params["mode"]
	prepares := test == plan.TestLatency || (test == plan.TestHandshake && (mode == "resumed" || mode == "0rtt")) ||
		((test == plan.TestPage || test == plan.TestSite) && params["connection"] == plan.ConnWarm)
	switch {
	case prepares && res.Prep <= 0:
		t.Errorf("Prep = %v, want > 0 (warm-up or priming before the measured part)", res.Prep)
	case !prepares && res.Prep != 0:
		t.Errorf("Prep = %v, want 0 (nothing before the measured part)", res.Prep)
	}
	if res.Wall <= 0 || res.Wall+res.Prep > took {
		t.Errorf("Wall %v + Prep %v: more than the %v the sample took (or no measured part)", res.Wall, res.Prep, took)
	}
}

// A sample's preparation is told apart from its measured part: the
// connections of latency and of a warm page load, and the priming
// connection of a resumed handshake, count as preparation; a download has
// none. A preparation that fails counts until the failure.
func TestPrepBeforeMeasuredPart(t *testing.T) {
	target := startServer(t)
	var ex Executor
	for _, c := range []struct {
		test, proto string
		params      map[string]string
	}{
		{plan.TestLatency, model.ProtoH2, map[string]string{"requests": "3"}},
		{plan.TestLatency, model.ProtoH3, map[string]string{"requests": "3"}},
		{plan.TestHandshake, model.ProtoH2, map[string]string{"mode": "resumed"}},
		{plan.TestHandshake, model.ProtoH3, map[string]string{"mode": "resumed"}},
		{plan.TestHandshake, model.ProtoH3, map[string]string{"mode": "0rtt"}},
		{plan.TestHandshake, model.ProtoH3, map[string]string{"mode": "full"}},
		{plan.TestPage, model.ProtoH2, map[string]string{"objects": "2", "size": "1KB", "connection": plan.ConnWarm}},
		{plan.TestPage, model.ProtoH2, map[string]string{"objects": "2", "size": "1KB", "connection": plan.ConnCold}},
		{plan.TestDownload, model.ProtoH2, map[string]string{"size": "100KB"}},
		{plan.TestDownload, model.ProtoH3, map[string]string{"size": "100KB"}},
	} {
		t.Run(c.test+"/"+c.proto+"/"+c.params["mode"]+c.params["connection"], func(t *testing.T) {
			start := time.Now()
			res := ex.Execute(context.Background(), Request{Test: c.test, Protocol: c.proto, Params: testParams(c.test, c.params), Target: target, Timeout: 20 * time.Second})
			took := time.Since(start)
			if res.Status != model.StatusOK {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			checkPrep(t, c.test, c.params, res, took)
		})
	}
	// The priming connection is refused: no measured part, and the time
	// until the failure is preparation.
	start := time.Now()
	res := ex.Execute(context.Background(), Request{Test: plan.TestHandshake, Protocol: model.ProtoH2,
		Params: testParams(plan.TestHandshake, map[string]string{"mode": "resumed"}), Target: Target{Host: "127.0.0.1", Port: 1}, Timeout: 5 * time.Second})
	took := time.Since(start)
	if res.Status != model.StatusFailed || res.Wall != 0 || res.Prep <= 0 || res.Prep > took {
		t.Errorf("failed priming: status %s (%s), wall %v, prep %v, took %v", res.Status, res.Error, res.Wall, res.Prep, took)
	}
}

func TestPageResourcesAndStreamTimeline(t *testing.T) {
	target := startServer(t)
	var ex Executor
	res := ex.Execute(context.Background(), Request{Test: plan.TestPage, Protocol: "h2", Params: testParams(plan.TestPage, map[string]string{"objects": "7", "size": "1KB"}), Target: target})
	if res.Status != model.StatusOK {
		t.Fatal(res.Error)
	}
	if len(res.Resources) != 8 || res.Metrics["resources"] != 8 {
		t.Fatalf("got %d resources, want 8 (document + 7 objects)", len(res.Resources))
	}
	for _, r := range res.Resources {
		if r.Protocol != "h2" || r.End < r.TTFB || r.TTFB < r.Start {
			t.Errorf("resource %+v: protocol or timings out of order", r)
		}
	}
	res = ex.Execute(context.Background(), Request{Test: plan.TestStream, Protocol: "h3", Params: testParams(plan.TestStream, map[string]string{"segments": "6", "interval": "2ms", "size": "1KB"}), Target: target})
	if res.Status != model.StatusOK {
		t.Fatal(res.Error)
	}
	var intervals int
	for _, s := range res.Timelines {
		if s.Kind == model.SeriesInterval {
			intervals = len(s.Points)
		}
	}
	if intervals != 5 {
		t.Fatalf("got %d inter-arrival points, want 5 for 6 segments", intervals)
	}
}

func TestBadRequests(t *testing.T) {
	var ex Executor
	target := Target{Host: "127.0.0.1", Port: 1}
	for _, req := range []Request{
		{Test: "nope", Protocol: "h2", Target: target},
		{Test: plan.TestTTFB, Protocol: "h9", Target: target},
		{Test: plan.TestTTFB, Protocol: "h2", Target: Target{Host: "not-an-ip", Port: 1}, Params: testParams(plan.TestTTFB, nil)},
		{Test: plan.TestDownload, Protocol: "h2", Target: target, Params: testParams(plan.TestDownload, map[string]string{"size": "-5MB"})},
		{Test: plan.TestHandshake, Protocol: "h2", Target: target, Params: testParams(plan.TestHandshake, map[string]string{"mode": "fast"})},
		{Test: plan.TestPage, Protocol: "h2", Client: "chromium", Target: target},
		{Test: plan.TestPage, Protocol: "h2", Target: target, Params: testParams(plan.TestPage, map[string]string{"connection": "hot"})},
		{Test: plan.TestSite, Protocol: "h2", Client: "chromium", Target: target, Params: testParams(plan.TestSite, map[string]string{"connection": "Warm"})},
	} {
		res := ex.Execute(context.Background(), req)
		if res.Status != model.StatusFailed || res.Error == "" {
			t.Errorf("%+v: status %s error %q, want a failure with a cause", req, res.Status, res.Error)
		}
	}
}

// TestPageConnection checks the built-in client's page test with connection
// cold (the document opens the connection inside the measurement) and warm
// (the measured load starts on a connection opened and used before it).
func TestPageConnection(t *testing.T) {
	target := startServer(t)
	var ex Executor
	for _, proto := range []string{model.ProtoH1, model.ProtoH1C, model.ProtoH2, model.ProtoH3} {
		for _, conn := range []string{"", plan.ConnCold, plan.ConnWarm} {
			t.Run(proto+"/"+conn, func(t *testing.T) {
				params := map[string]string{"objects": "3", "size": "2KB"}
				if conn != "" {
					params["connection"] = conn
				}
				start := time.Now()
				res := ex.Execute(context.Background(), Request{Test: plan.TestPage, Protocol: proto, Params: testParams(plan.TestPage, params), Target: target, Timeout: 20 * time.Second})
				took := time.Since(start)
				if res.Status != model.StatusOK {
					t.Fatalf("status %s: %s", res.Status, res.Error)
				}
				checkPrep(t, plan.TestPage, params, res, took)
				warm := conn == plan.ConnWarm
				want := map[bool]float64{false: 0, true: 1}[warm]
				if got, ok := res.Metrics["connection_reused"]; !ok || got != want {
					t.Errorf("connection_reused = %v (present %v), want %v", got, ok, want)
				}
				// connect_ms and handshake_ms belong to the cold load's
				// measurement only; ttfb_ms is there in both.
				if _, ok := res.Metrics["handshake_ms"]; ok == warm {
					t.Errorf("handshake_ms present %v for connection %q", ok, conn)
				}
				if res.Metrics["ttfb_ms"] <= 0 || res.Metrics["ttfb_ms"] > res.Metrics["plt_ms"] || res.Metrics["resources"] != 4 {
					t.Errorf("metrics %v", res.Metrics)
				}
				// h2 and h3 carry the whole page (and, warm, the warm-up
				// request) on one connection.
				if (proto == model.ProtoH2 || proto == model.ProtoH3) && res.Metrics["connections"] != 1 {
					t.Errorf("%v connections, want 1", res.Metrics["connections"])
				}
			})
		}
	}
}

func TestZeroRTTOverTCPIsFailedNotMeasured(t *testing.T) {
	target := startServer(t)
	var ex Executor
	res := ex.Execute(context.Background(), Request{Test: plan.TestHandshake, Protocol: "h2", Params: testParams(plan.TestHandshake, map[string]string{"mode": "0rtt"}), Target: target})
	if res.Status == model.StatusOK {
		t.Fatal("0-RTT over TCP was reported as measured")
	}
}

func TestGeneratedSiteOverLoopback(t *testing.T) {
	dirs, err := sites.WriteAll(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1", Sites: dirs})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	info := srv.Info()
	target := Target{Host: "127.0.0.1", Port: info.Port, PlainPort: info.PlainPort, CAPEM: info.CAPEM}
	var ex Executor
	for _, shape := range sites.Builtin {
		for _, proto := range []string{"h1", "h3"} {
			res := ex.Execute(context.Background(), Request{Test: plan.TestSite, Protocol: proto, Params: testParams(plan.TestSite, map[string]string{"site": shape.Name}), Target: target})
			if res.Status != model.StatusOK {
				t.Fatalf("%s over %s: %s", shape.Name, proto, res.Error)
			}
			if got := int(res.Metrics["resources"]); got != shape.Requests {
				t.Errorf("%s over %s: %d requests, want %d", shape.Name, proto, got, shape.Requests)
			}
			if got := int64(res.Metrics["page_bytes"]); got != shape.Bytes {
				t.Errorf("%s over %s: %d bytes, want %d", shape.Name, proto, got, shape.Bytes)
			}
		}
	}
}

// testParams decodes test parameters as a plan writes them, the defaults
// for those not given. A value the test does not accept is left as far as
// it decoded: the Executor's own check of what it is handed is under test.
func testParams(test string, values map[string]string) plan.Params {
	p, _ := plan.DecodeParams(test, values)
	return p
}

func TestStallLimitsFollowTheLink(t *testing.T) {
	base := Request{Protocol: model.ProtoH2, Target: Target{Host: "10.0.0.2", Port: 443}}
	spec, err := baseSpec(base)
	if err != nil {
		t.Fatal(err)
	}
	if spec.IdleTimeout != endpoint.DefaultIdleTimeout || spec.FirstByteTimeout != endpoint.DefaultFirstByteTimeout {
		t.Errorf("no link wait: idle %v, first byte %v; want the defaults", spec.IdleTimeout, spec.FirstByteTimeout)
	}
	// size-bandwidth-grid's 1 Mbit/s cell: 100 ms and a 1000-packet queue
	// down, nothing up.
	down, err := spec2.Parse("delay 100ms rate 1mbit loss 0.1%")
	if err != nil {
		t.Fatal(err)
	}
	deep := base
	deep.LinkWait = down.MaxWait()
	if spec, err = baseSpec(deep); err != nil {
		t.Fatal(err)
	}
	want := 3*(12*time.Second+100*time.Millisecond) + 10*time.Second
	if spec.IdleTimeout != want || spec.FirstByteTimeout != want {
		t.Errorf("1 Mbit/s, 1000-packet queue: idle %v, first byte %v; want %v", spec.IdleTimeout, spec.FirstByteTimeout, want)
	}
	// A short wait adds its three waits to the idle limit and keeps the
	// larger default first-byte limit.
	short := base
	short.LinkWait = 50 * time.Millisecond
	if spec, err = baseSpec(short); err != nil {
		t.Fatal(err)
	}
	if spec.IdleTimeout != 10150*time.Millisecond || spec.FirstByteTimeout != endpoint.DefaultFirstByteTimeout {
		t.Errorf("50 ms link: idle %v, first byte %v; want 10.15s and the default 15s", spec.IdleTimeout, spec.FirstByteTimeout)
	}
}
