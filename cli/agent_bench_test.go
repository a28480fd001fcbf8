package cli

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// benchCases are the bench page's tests with small parameters, and the
// metrics each sample must have (the built-in client's names).
var benchCases = []struct {
	test    string
	params  map[string]string
	metrics []string
}{
	{plan.TestLatency, map[string]string{"requests": "5"}, []string{"latency_ms", "latency_p50_ms", "latency_p95_ms", "latency_max_ms", "jitter_ms", "requests"}},
	{plan.TestTTFB, nil, []string{"ttfb_ms"}},
	{plan.TestDownload, map[string]string{"size": "300KB"}, []string{"goodput_mbps", "transfer_ms", "bytes"}},
	{plan.TestUpload, map[string]string{"size": "300KB"}, []string{"goodput_mbps", "transfer_ms", "bytes", "server_receive_ms"}},
	{plan.TestMultiplex, map[string]string{"objects": "3", "size": "50KB"}, []string{"span_ms", "finish_p50_ms", "finish_first_ms", "finish_last_ms", "objects", "hol_empty_bins"}},
	{plan.TestStream, map[string]string{"segments": "4", "interval": "10ms", "size": "2KB"}, []string{"interval_p50_ms", "interval_p95_ms", "interval_max_ms", "stalls", "segments"}},
}

// TestChromiumBenchEveryTest runs every bench page test in real Chromium
// through the agent's executor over loopback, over h1 (h2 and h3 run
// across a testbed in runner's TestChromiumBenchPhysics): each sample is
// valid, has the built-in client's metrics, its protocol, a cross-origin
// isolated clock (5 us steps), and a preparation and a measured part
// within the time it took.
func TestChromiumBenchEveryTest(t *testing.T) {
	requireChromiumCLI(t)
	profiles, target := browserTestbed(t)
	ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{})}
	defer closeClients(ex.Clients) // on every path (a no-op once closed)
	for _, c := range benchCases {
		p, err := plan.DecodeParams(c.test, c.params)
		if err != nil {
			t.Fatal(err)
		}
		for _, proto := range []string{model.ProtoH1} {
			req := workload.Request{Test: c.test, Protocol: proto, Client: "chromium", Params: p, Target: target, Timeout: 20 * time.Second}
			start := time.Now()
			res := ex.Execute(context.Background(), req)
			took := time.Since(start)
			name := c.test + "/" + proto
			if res.Status != model.StatusOK {
				t.Errorf("%s: %s: %s", name, res.Status, res.Error)
				continue
			}
			for _, m := range c.metrics {
				if _, ok := res.Metrics[m]; !ok {
					t.Errorf("%s: no metric %s (have %v)", name, m, slices.Sorted(maps.Keys(res.Metrics)))
				}
			}
			if got := res.Metrics["timer_resolution_us"]; got != 5 {
				t.Errorf("%s: timer resolution %v us, want 5 (cross-origin isolated)", name, got)
			}
			if want := map[string]string{"h1": "http/1.1", "h2": "h2", "h3": "h3"}[proto]; res.Negotiated.ALPN != want {
				t.Errorf("%s: negotiated %q, want %q", name, res.Negotiated.ALPN, want)
			}
			if res.Prep <= 0 || res.Wall <= 0 || res.Prep+res.Wall > took {
				t.Errorf("%s: prep %v + wall %v, took %v", name, res.Prep, res.Wall, took)
			}
			if res.Bytes <= 0 || res.CPU.ClientUser+res.CPU.ClientSys <= 0 {
				t.Errorf("%s: %d bytes, client CPU %v", name, res.Bytes, res.CPU)
			}
			b, _ := json.Marshal(res.Metrics)
			t.Logf("%s: %s prep %v wall %v", name, b, res.Prep.Round(time.Millisecond), res.Wall.Round(time.Microsecond))
		}
	}
	closeClients(ex.Clients)
	assertNoProfiles(t, profiles)
}
