package workload

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

const benchOrigin = "https://10.9.2.2:4433"

// fakePage is a bench page result as endpoint/bench.js writes it.
type fakePage map[string]any

// entry is a Resource (or Navigation) Timing entry of the fake page.
func entry(typ, path, proto string, start, reqStart, end float64) map[string]any {
	return map[string]any{"name": benchOrigin + path, "type": typ, "protocol": proto,
		"startTime": start, "connectStart": start, "secureConnectionStart": start, "connectEnd": start,
		"requestStart": reqStart, "responseStart": reqStart + 1, "responseEnd": end, "encodedBodySize": 1000}
}

// newPage is a valid result of test over proto whose measured part ran
// from t0 = 100 ms to t1, with the page's own two entries.
func newPage(test, proto string, t1 float64, reqs []map[string]any, entries ...map[string]any) fakePage {
	all := []map[string]any{
		entry("navigation", "/bench?test="+test, proto, 0, 5, 20),
		entry("resource", "/bench.js", proto, 30, 31, 40),
	}
	return fakePage{"version": 1, "test": test, "isolated": true, "timer_ms": 0.005,
		"time_origin": 1.7e12, "t0": 100.0, "t1": t1, "requests": reqs, "entries": append(all, entries...)}
}

func (p fakePage) json(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runBench takes a chromium sample whose browser returns data.
func runBench(t *testing.T, test, proto string, prm map[string]string, data []byte) (*Result, []string) {
	t.Helper()
	return runBenchReport(t, test, proto, prm, data, nil)
}

// runBenchReport is runBench with a driver that also reports rep.
func runBenchReport(t *testing.T, test, proto string, prm map[string]string, data []byte, rep *BrowserReport) (*Result, []string) {
	t.Helper()
	var urls []string
	ex := &Executor{Clients: map[string]ClientImpl{"chromium": {Bench: func(_ context.Context, req Request, u string) ([]byte, *BrowserReport, error) {
		urls = append(urls, u)
		return data, rep, nil
	}}}}
	req := Request{Test: test, Protocol: proto, Client: "chromium", Params: testParams(test, prm), Target: Target{Host: "10.9.2.2", Port: 4433}}
	return ex.Execute(context.Background(), req), urls
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

// TestBenchDownloadMetrics checks a valid download: the URL of the bench
// page, the goodput from the request's requestStart to the last chunk,
// the protocol and the measured part placed on the page's clock.
func TestBenchDownloadMetrics(t *testing.T) {
	req := map[string]any{"name": "/bytes/1000000?qb=0", "start": 0.5, "end": 80.5, "bytes": 1000000}
	page := newPage("download", "h2", 181, []map[string]any{req},
		entry("resource", "/bytes/1000000?qb=0", "h2", 100.5, 100.5+0.5, 180.4))
	res, urls := runBench(t, plan.TestDownload, model.ProtoH2, map[string]string{"size": "1MB"}, page.json(t))
	if res.Status != model.StatusOK {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if len(urls) != 1 || urls[0] != benchOrigin+"/bench?size=1000000&test=download" {
		t.Errorf("urls %q", urls)
	}
	// requestStart 101 = 1 ms after t0; the last chunk 80.5 ms after t0
	if got := res.Metrics["transfer_ms"]; !near(got, 79.5) {
		t.Errorf("transfer_ms %v, want 79.5", got)
	}
	if got, want := res.Metrics["goodput_mbps"], 8e6/0.0795/1e6; !near(got, want) {
		t.Errorf("goodput_mbps %v, want %v", got, want)
	}
	if res.Metrics["bytes"] != 1e6 || res.Bytes != 1e6 || res.Metrics["timer_resolution_us"] != 5 {
		t.Errorf("metrics %v, bytes %d", res.Metrics, res.Bytes)
	}
	if res.Negotiated.ALPN != "h2" || res.Negotiated.HTTPVersion != "HTTP/2.0" {
		t.Errorf("negotiated %+v", res.Negotiated)
	}
	if res.Wall > time.Millisecond || res.Prep != 0 {
		// the fake page's clock (1.7e12 ms since the epoch: 2023) is long
		// before the sample: no preparation, and a wall within the
		// sample's (instant) duration
		t.Errorf("prep %v wall %v, want 0 and under 1ms for a page clock before the sample", res.Prep, res.Wall)
	}
}

// TestBenchTimes checks how the page's measured part is placed in the
// sample: the preparation until it began, and never more than the time
// the sample took.
func TestBenchTimes(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(d time.Duration) time.Duration { return time.Duration(start.Add(d).UnixNano()) }
	for _, c := range []struct {
		took, measured, wall, prep, w time.Duration
	}{
		{3 * time.Second, at(time.Second), 500 * time.Millisecond, time.Second, 500 * time.Millisecond},
		{3 * time.Second, at(-time.Second), 500 * time.Millisecond, 0, 500 * time.Millisecond},                       // page clock behind
		{3 * time.Second, at(2900 * time.Millisecond), time.Second, 2900 * time.Millisecond, 100 * time.Millisecond}, // clamped to took
		{3 * time.Second, at(5 * time.Second), time.Second, 3 * time.Second, 0},
	} {
		p, w := benchTimes(start, c.took, c.measured, c.wall)
		if p != c.prep || w != c.w {
			t.Errorf("took %v measured at %v for %v: prep %v wall %v, want %v %v", c.took, c.measured-at(0), c.wall, p, w, c.prep, c.w)
		}
	}
}

// TestBenchInvalidAndFailed checks the results that make a sample invalid
// (the page ran but did not measure what was asked) or failed.
func TestBenchInvalidAndFailed(t *testing.T) {
	dl := func(mod func(p fakePage)) []byte {
		req := map[string]any{"name": "/bytes/1000?qb=0", "start": 0.5, "end": 10, "bytes": 1000}
		p := newPage("download", "h3", 111, []map[string]any{req}, entry("resource", "/bytes/1000?qb=0", "h3", 100.5, 101, 110))
		if mod != nil {
			mod(p)
		}
		b, _ := json.Marshal(p)
		return b
	}
	entries := func(p fakePage) []map[string]any { return p["entries"].([]map[string]any) }
	cases := []struct {
		name   string
		data   []byte
		status model.Status
		want   string
	}{
		{"valid", dl(nil), model.StatusOK, ""},
		{"malformed JSON", []byte(`{"version":1,"test":"download"`), model.StatusFailed, "malformed JSON"},
		{"not an object", []byte(`"oops"`), model.StatusFailed, "malformed JSON"},
		{"trailing data", append(dl(nil), []byte(` {}`)...), model.StatusFailed, "data after the result object"},
		{"other version", dl(func(p fakePage) { p["version"] = 7 }), model.StatusFailed, "version 7, want 1"},
		{"other test", dl(func(p fakePage) { p["test"] = "upload" }), model.StatusFailed, `the page ran test "upload", not download`},
		{"no navigation entry", dl(func(p fakePage) { p["entries"] = entries(p)[1:] }), model.StatusFailed, "no navigation timing entry"},
		{"script over h2", dl(func(p fakePage) { entries(p)[1]["protocol"] = "h2" }), model.StatusInvalid, "1 of 3 resources did not use h3: /bench.js used h2"},
		{"request over http/1.1", dl(func(p fakePage) { entries(p)[2]["protocol"] = "http/1.1" }), model.StatusInvalid, "/bytes/1000?qb=0 used http/1.1"},
		{"no protocol", dl(func(p fakePage) { entries(p)[0]["protocol"] = "" }), model.StatusInvalid, "/bench?test=download used no protocol"},
		{"no entry for the request", dl(func(p fakePage) { p["entries"] = entries(p)[:2] }), model.StatusInvalid, "no Resource Timing entry for /bytes/1000?qb=0"},
		{"not isolated", dl(func(p fakePage) { p["isolated"] = false; p["timer_ms"] = 0.1 }), model.StatusInvalid, "not cross-origin isolated: the browser's timer was coarsened to 0.1 ms"},
		{"page error", dl(func(p fakePage) { p["error"] = "Failed to fetch" }), model.StatusFailed, "bench page: Failed to fetch"},
		{"short body", dl(func(p fakePage) { p["requests"].([]map[string]any)[0]["bytes"] = 999 }), model.StatusFailed, "received 999 bytes, want 1000"},
		{"two requests", dl(func(p fakePage) {
			r := p["requests"].([]map[string]any)
			p["requests"] = append(r, r[0])
		}), model.StatusFailed, "2 measured requests, want 1"},
		{"end before start", dl(func(p fakePage) { p["requests"].([]map[string]any)[0]["end"] = 0.1 }), model.StatusFailed, "start 0.5 ms, end 0.1 ms"},
	}
	for _, c := range cases {
		res, _ := runBench(t, plan.TestDownload, model.ProtoH3, map[string]string{"size": "1000B"}, c.data)
		if res.Status != c.status || !strings.Contains(res.Error, c.want) {
			t.Errorf("%s: %s %q, want %s with %q", c.name, res.Status, res.Error, c.status, c.want)
		}
		if c.status == model.StatusInvalid && res.Negotiated.ALPN == "" && c.name != "no protocol" {
			t.Errorf("%s: an invalid sample keeps the document's protocol", c.name)
		}
	}
}

// TestBenchLatencyWarmConnection checks the latency metrics of the page's
// requests and that a request over a connection opened for it makes the
// sample invalid.
func TestBenchLatencyWarmConnection(t *testing.T) {
	var reqs, ents []map[string]any
	lat := []float64{2, 4, 3}
	start := 0.0
	for i, l := range lat {
		name := "/echo?qb=" + string(rune('0'+i))
		reqs = append(reqs, map[string]any{"name": name, "start": start, "end": start + l, "bytes": 3})
		ents = append(ents, entry("resource", name, "http/1.1", 100+start, 100+start+0.1, 100+start+l))
		start += l + 1
	}
	page := newPage("latency", "http/1.1", 112, reqs, ents...)
	res, urls := runBench(t, plan.TestLatency, model.ProtoH1, map[string]string{"requests": "3"}, page.json(t))
	if res.Status != model.StatusOK {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if urls[0] != benchOrigin+"/bench?requests=3&size=0&test=latency" {
		t.Errorf("url %q", urls[0])
	}
	want := map[string]float64{"latency_ms": 3, "latency_p50_ms": 3, "latency_p95_ms": 4, "latency_max_ms": 4, "jitter_ms": 1.5, "requests": 3}
	for k, v := range want {
		if !near(res.Metrics[k], v) {
			t.Errorf("%s %v, want %v", k, res.Metrics[k], v)
		}
	}
	if len(res.Timelines) != 1 || res.Timelines[0].Points[1].T != 3e6 || res.Timelines[0].Points[1].V != 4 {
		t.Errorf("timelines %+v", res.Timelines)
	}
	ents[1]["connectEnd"] = ents[1]["connectStart"].(float64) + 2
	res, _ = runBench(t, plan.TestLatency, model.ProtoH1, map[string]string{"requests": "3"}, page.json(t))
	if res.Status != model.StatusInvalid || !strings.Contains(res.Error, "request /echo?qb=1 opened a new connection (2 ms)") {
		t.Errorf("new connection: %s %q", res.Status, res.Error)
	}
}

// TestBenchMultiplexAndStream checks the metrics computed from the page's
// chunk records: the head-of-line bins and the segments' intervals.
func TestBenchMultiplexAndStream(t *testing.T) {
	// two streams of 3000 bytes: one steady, one stalled 30 ms inside
	chunks := [][][2]float64{{{5, 1000}, {15, 1000}, {25, 2000 - 1000}}, {{5, 1000}, {45, 2000}}}
	var reqs, ents []map[string]any
	for i, c := range chunks {
		name := "/bytes/3000?object=" + string(rune('0'+i))
		reqs = append(reqs, map[string]any{"name": name, "start": 0.1, "end": c[len(c)-1][0], "bytes": 3000, "chunks": c})
		ents = append(ents, entry("resource", name, "h3", 100.1, 100.2, 100+c[len(c)-1][0]))
	}
	res, _ := runBench(t, plan.TestMultiplex, model.ProtoH3, map[string]string{"objects": "2", "size": "3000B"}, newPage("multiplex", "h3", 150, reqs, ents...).json(t))
	if res.Status != model.StatusOK {
		t.Fatalf("multiplex: %s: %s", res.Status, res.Error)
	}
	want := map[string]float64{"span_ms": 44.9, "finish_first_ms": 25, "finish_last_ms": 45, "finish_p50_ms": 25, "objects": 2, "hol_empty_bins": 3}
	for k, v := range want {
		if !near(res.Metrics[k], v) {
			t.Errorf("multiplex %s %v, want %v", k, res.Metrics[k], v)
		}
	}
	if len(res.Timelines) != 2 || res.Timelines[1].Kind != model.SeriesHOL {
		t.Errorf("multiplex timelines %+v", res.Timelines)
	}

	// 3 segments of 1000 bytes, 10 ms apart; the second arrives in two
	// chunks, the last two segments late together
	sc := [][2]float64{{10, 1000}, {18, 500}, {20, 500}, {50, 2000}}
	req := map[string]any{"name": "/stream?segments=4&interval=10ms&size=1000&qb=0", "start": 0.1, "end": 50, "bytes": 4000, "chunks": sc}
	page := newPage("stream", "h2", 150, []map[string]any{req}, entry("resource", "/stream?segments=4&interval=10ms&size=1000&qb=0", "h2", 100, 100.5, 150))
	res, urls := runBench(t, plan.TestStream, model.ProtoH2, map[string]string{"segments": "4", "interval": "10ms", "size": "1000B"}, page.json(t))
	if res.Status != model.StatusOK {
		t.Fatalf("stream: %s: %s", res.Status, res.Error)
	}
	if urls[0] != benchOrigin+"/bench?interval=10ms&segments=4&size=1000&test=stream" {
		t.Errorf("url %q", urls[0])
	}
	// arrivals 10, 20, 50, 50: intervals 10, 30, 0; one gap above 20 ms
	want = map[string]float64{"interval_p50_ms": 10, "interval_p95_ms": 30, "interval_max_ms": 30, "stalls": 1, "segments": 4}
	for k, v := range want {
		if !near(res.Metrics[k], v) {
			t.Errorf("stream %s %v, want %v", k, res.Metrics[k], v)
		}
	}
}

// TestBenchUploadAndTTFB checks the upload's server report and the ttfb
// measured on the padded document.
func TestBenchUploadAndTTFB(t *testing.T) {
	req := map[string]any{"name": "/upload?qb=0", "start": 0, "end": 40, "bytes": 0, "upload": 2000000, "server": map[string]any{"bytes": 2000000, "nanos": 30e6}}
	page := newPage("upload", "h3", 141, []map[string]any{req}, entry("resource", "/upload?qb=0", "h3", 100, 100, 140))
	res, _ := runBench(t, plan.TestUpload, model.ProtoH3, map[string]string{"size": "2MB"}, page.json(t))
	if res.Status != model.StatusOK || !near(res.Metrics["transfer_ms"], 40) || !near(res.Metrics["goodput_mbps"], 400) || !near(res.Metrics["server_receive_ms"], 30) {
		t.Errorf("upload: %s %q %v", res.Status, res.Error, res.Metrics)
	}
	req["server"] = map[string]any{"bytes": 1999999, "nanos": 30e6}
	res, _ = runBench(t, plan.TestUpload, model.ProtoH3, map[string]string{"size": "2MB"}, page.json(t))
	if res.Status != model.StatusFailed || !strings.Contains(res.Error, "the server received 1999999 bytes, want 2000000") {
		t.Errorf("short upload: %s %q", res.Status, res.Error)
	}

	page = newPage("ttfb", "h2", 0, nil)
	page["t0"] = 0.0
	nav := page["entries"].([]map[string]any)[0]
	nav["responseStart"], nav["encodedBodySize"] = 61.5, 1000
	res, urls := runBench(t, plan.TestTTFB, model.ProtoH2, nil, page.json(t))
	if res.Status != model.StatusOK || res.Metrics["ttfb_ms"] != 61.5 || urls[0] != benchOrigin+"/bench?size=1000&test=ttfb" {
		t.Errorf("ttfb: %s %q %v %q", res.Status, res.Error, res.Metrics, urls)
	}
	nav["encodedBodySize"] = 1200
	if res, _ = runBench(t, plan.TestTTFB, model.ProtoH2, nil, page.json(t)); res.Status != model.StatusFailed || !strings.Contains(res.Error, "1200 bytes, want 1000") {
		t.Errorf("ttfb of another document: %s %q", res.Status, res.Error)
	}
}

// TestBenchBrowserReport checks that a driver's report makes the sample's
// client CPU (a persistent browser is not this process's child), and adds
// its warnings and metrics; a report saying the CPU could not be read
// leaves it unavailable.
func TestBenchBrowserReport(t *testing.T) {
	req := map[string]any{"name": "/bytes/1000000?qb=0", "start": 0.5, "end": 80.5, "bytes": 1000000}
	page := newPage("download", "h2", 181, []map[string]any{req},
		entry("resource", "/bytes/1000000?qb=0", "h2", 100.5, 100.5+0.5, 180.4))
	rep := &BrowserReport{
		CPU:      model.CPUUsage{ClientUser: 300 * time.Millisecond, ClientSys: 70 * time.Millisecond},
		Warnings: []string{"browser restarted before the sample: it had ended"},
		Metrics:  map[string]float64{"browser_pss_mb": 312, "browser_age": 1},
	}
	res, _ := runBenchReport(t, plan.TestDownload, model.ProtoH2, map[string]string{"size": "1MB"}, page.json(t), rep)
	if res.Status != model.StatusOK {
		t.Fatalf("%s: %s", res.Status, res.Error)
	}
	if res.CPU.ClientUser != 300*time.Millisecond || res.CPU.ClientSys != 70*time.Millisecond || res.ClientCPUUnavailable {
		t.Errorf("client CPU %+v (unavailable %v), want the report's", res.CPU, res.ClientCPUUnavailable)
	}
	if len(res.Warnings) != 1 || res.Warnings[0] != rep.Warnings[0] {
		t.Errorf("warnings %q", res.Warnings)
	}
	if res.Metrics["browser_pss_mb"] != 312 || res.Metrics["browser_age"] != 1 || res.Metrics["goodput_mbps"] <= 0 {
		t.Errorf("metrics %v", res.Metrics)
	}
	rep = &BrowserReport{CPUUnavailable: true}
	if res, _ := runBenchReport(t, plan.TestDownload, model.ProtoH2, map[string]string{"size": "1MB"}, page.json(t), rep); !res.ClientCPUUnavailable {
		t.Errorf("a report without CPU: client CPU %+v, not marked unavailable", res.CPU)
	}
}

// TestBenchDispatch checks what fails before any browser starts.
func TestBenchDispatch(t *testing.T) {
	called := 0
	bench := func(context.Context, Request, string) ([]byte, *BrowserReport, error) { called++; return nil, nil, nil }
	lighthouse := func(context.Context, Request, string) (*Result, error) { called++; return nil, nil }
	ex := &Executor{Clients: map[string]ClientImpl{"chromium": {Bench: bench}, "lighthouse": {Load: lighthouse}}}
	target := Target{Host: "10.9.2.2", Port: 4433}
	// firefox becomes a browser client with its own driver: without one
	// its samples fail, with one they reach it
	req := Request{Test: plan.TestDownload, Protocol: model.ProtoH2, Client: "firefox", Params: testParams(plan.TestDownload, nil), Target: target}
	if r := ex.Execute(context.Background(), req); r.Status != model.StatusFailed || !strings.Contains(r.Error, "client firefox: not available in this agent") {
		t.Errorf("firefox without a driver: %s %s", r.Status, r.Error)
	}
	var firefoxURL string
	ff := &Executor{Clients: map[string]ClientImpl{"firefox": {Bench: func(_ context.Context, _ Request, u string) ([]byte, *BrowserReport, error) {
		firefoxURL = u
		return []byte("{"), nil, nil
	}}}}
	if r := ff.Execute(context.Background(), req); r.Status != model.StatusFailed || firefoxURL != benchOrigin+"/bench?size=1000000&test=download" {
		t.Errorf("firefox with a driver: %s %s, url %q", r.Status, r.Error, firefoxURL)
	}
	for _, c := range []struct {
		client, test, proto string
		prm                 map[string]string
		want                string
	}{
		{"chromium", plan.TestHandshake, model.ProtoH2, nil, "not handshake"},
		{"chromium", plan.TestCPU, model.ProtoH2, nil, "not cpu"},
		{"chromium", plan.TestDownload, model.ProtoH1C, nil, "client chromium speaks h1, h2 and h3, not h1c"},
		{"chromium", plan.TestTTFB, model.ProtoH2, map[string]string{"size": "100B"}, "size 100B is outside 512B..10MB"},
		{"chromium", plan.TestUpload, model.ProtoH2, map[string]string{"size": "2GB"}, "size 2GB is above 1GB"},
		{"lighthouse", plan.TestDownload, model.ProtoH2, nil, "client lighthouse runs only page and site tests, not download"},
	} {
		r := ex.Execute(context.Background(), Request{Test: c.test, Protocol: c.proto, Client: c.client, Params: testParams(c.test, c.prm), Target: target})
		if r.Status != model.StatusFailed || !strings.Contains(r.Error, c.want) {
			t.Errorf("%s %s %s: %s %q, want failed with %q", c.client, c.test, c.proto, r.Status, r.Error, c.want)
		}
	}
	if called > 0 {
		t.Errorf("the browser was started %d times for requests that cannot run", called)
	}
}
