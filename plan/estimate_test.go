package plan

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

// mustEstimate is EstimateSample of c with the given timeout; an error
// ends the test.
func mustEstimate(t *testing.T, c *model.Cell, timeout time.Duration) time.Duration {
	t.Helper()
	d, err := EstimateSample(c, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// estCell builds a cell of test with the given link specs and parameters.
func estCell(test, proto, client, up, down string, params ...string) model.Cell {
	c := model.Cell{Key: "k/" + test + "/" + proto, Test: test, Protocol: proto, Client: client, LinkUp: up, LinkDown: down}
	for i := 0; i+1 < len(params); i += 2 {
		c.Factors = append(c.Factors, model.Factor{Name: params[i], Value: params[i+1]})
	}
	return c
}

func nearDur(a, b time.Duration) bool { return (a - b).Abs() <= time.Microsecond }

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func TestEstimateRateLimitedDownload(t *testing.T) {
	// 10 MB over "rate 10mbit delay 25ms" each way, HTTP/2: RTT 50.2 ms.
	c := estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "rate 10mbit delay 25ms", "rate 10mbit delay 25ms", "size", "10MB")
	got := mustEstimate(t, &c, time.Minute)
	rtt := 50.2
	handshake := 2 * rtt // TCP, then TLS 1.3
	request := rtt
	// payload at 1448/1500 of 10 Mbit/s: 8.2873 s
	bytes := 10e6 * 8 / (10e6 * 1448 / 1500) * 1000
	// slow start: the window covers the BDP (60.6 KB) after 3 rounds of
	// 10, 20, 40 segments: 2 rounds beyond the request's
	slowStart := 2 * rtt
	client := handshake + request + bytes + slowStart
	want := ms(client + 3 + 25) // runner overhead, drain of one 25 ms one-way delay
	if !nearDur(got, want) {
		t.Errorf("estimate %v, want %v", got, want)
	}
	if got < 8*time.Second || got > 9*time.Second {
		t.Errorf("estimate %v: want about 8 s of transfer plus the handshake", got)
	}
}

func TestEstimateLossUsesMathis(t *testing.T) {
	// No rate limit: with 1% loss at RTT 100.2 ms a long transfer runs at
	// the Mathis et al. bound, 1.22 * 1448 B * 8 / (0.1002 s * sqrt(0.01))
	// = 1.41 Mbit/s, far below the machine's cap.
	const rtt = 100.2
	rto := 200 + rtt                        // TCP: minimum RTO plus the RTT
	exchange := rtt + 0.02*rto              // a packet each way, 1% loss each
	handshake := rtt + 0.02*1000 + exchange // a lost SYN or SYN-ACK costs 1 s
	fixed := handshake + exchange + 3 + 50  // + runner overhead, drain
	mathis := 1.22 * 1448 * 8 / (rtt / 1000 * 0.1)
	for _, proto := range []string{model.ProtoH2, model.ProtoH3} {
		c := estCell(TestDownload, proto, model.ClientBuiltin, "delay 50ms loss 1%", "delay 50ms loss 1%", "size", "200MB")
		got := mustEstimate(t, &c, 0)
		want := 200e6 * 8 / mathis // s
		if transfer := got.Seconds() - fixed/1000; math.Abs(transfer/want-1) > 0.01 {
			t.Errorf("%s: transfer %.1f s, want the Mathis bound's %.1f s within 1%%", proto, transfer, want)
		}
	}

	// A short transfer ends before its window settles: 200 packets in
	// slow start (10, 20, 40, 80), the first loss after 100 packets (the
	// window goes from 80 to 56), the rest in a fifth round trip: four
	// round trips beyond the request's.
	c := estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "delay 50ms loss 1%", "delay 50ms loss 1%", "size", "289600B")
	got := mustEstimate(t, &c, 0)
	if want := ms(fixed + 4*rtt); !nearDur(got, want) {
		t.Errorf("200 packets at 1%% loss: %v, want %v", got, want)
	}
}

func TestEstimateLossyQueue(t *testing.T) {
	// At 10 Mbit/s and 0.1% loss the bottleneck queue lets the window grow
	// past the bandwidth-delay product: the transfer stays at the rate
	// for a while. A tiny queue leaves it to the Mathis bound sooner.
	big := estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "", "delay 100ms rate 10mbit loss 0.1%", "size", "10MB")
	small := estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "", "delay 100ms rate 10mbit loss 0.1% limit 10", "size", "10MB")
	b := mustEstimate(t, &big, 0)
	s := mustEstimate(t, &small, 0)
	atRate := 10e6 * 8 / (10e6 * 1448 / 1500)
	if b.Seconds() < atRate || s <= b {
		t.Errorf("10 MB at 10 Mbit/s, 0.1%% loss: %v with the default queue, %v with 10 packets; want >= %.1f s and more with the small queue", b, s, atRate)
	}
}

func TestEstimateMachineCap(t *testing.T) {
	// 1 GB over an unimpaired link: 8 s at QUIC's 1 Gbit/s cap, about
	// 2.7 s at TCP's 3 Gbit/s.
	for _, tc := range []struct {
		proto string
		want  float64 // seconds of payload
	}{{model.ProtoH3, 8}, {model.ProtoH2, 8.0 / 3}} {
		c := estCell(TestDownload, tc.proto, model.ClientBuiltin, "", "", "size", "1GB")
		got := mustEstimate(t, &c, 0)
		if math.Abs(got.Seconds()-tc.want) > 0.01 {
			t.Errorf("%s: %v, want about %.2f s", tc.proto, got, tc.want)
		}
	}
}

func TestEstimateTimeoutCaps(t *testing.T) {
	// 50 MB at 1 Mbit/s takes about 7 minutes: a 60 s timeout ends it.
	c := estCell(TestDownload, model.ProtoH3, model.ClientBuiltin, "rate 1mbit", "rate 1mbit", "size", "50MB")
	got := mustEstimate(t, &c, time.Minute)
	if want := time.Minute + 3*time.Millisecond; got != want { // timeout + runner overhead, no drain
		t.Errorf("estimate %v, want %v", got, want)
	}
	uncapped, _ := EstimateSample(&c, 0)
	if uncapped < 6*time.Minute {
		t.Errorf("without a timeout: %v, want about 7 minutes", uncapped)
	}
}

func TestEstimateTests(t *testing.T) {
	// Round trips of each test over "delay 25ms" each way (RTT 50.2 ms), no
	// loss, no rate: what the model counts, in RTTs, plus fixed costs.
	const rtt = 50.2
	cases := []struct {
		name string
		c    model.Cell
		want float64 // ms, client part + runner overhead + drain (builtin)
	}{
		{"latency h2: connect+echo, 20 requests", estCell(TestLatency, model.ProtoH2, "builtin", "delay 25ms", "delay 25ms", "requests", "20", "size", "0B"),
			(2+1+20)*rtt + 3 + 25},
		{"ttfb h3: 1 handshake RTT, 1 request", estCell(TestTTFB, model.ProtoH3, "builtin", "delay 25ms", "delay 25ms", "size", "1KB"),
			2*rtt + 1000*8/estCapQUIC*1000 + 3 + 25},
		{"handshake full h1c", estCell(TestHandshake, model.ProtoH1C, "builtin", "delay 25ms", "delay 25ms", "mode", "full"),
			2*rtt + 3 + 25},
		{"handshake resumed h2: priming, then resumed", estCell(TestHandshake, model.ProtoH2, "builtin", "delay 25ms", "delay 25ms", "mode", "resumed"),
			6*rtt + 3 + 25},
		{"handshake 0rtt h3: priming, then one round trip", estCell(TestHandshake, model.ProtoH3, "builtin", "delay 25ms", "delay 25ms", "mode", "0rtt"),
			3*rtt + 3 + 25},
		{"stream: 19 intervals paced", estCell(TestStream, model.ProtoH2, "builtin", "delay 25ms", "delay 25ms", "segments", "20", "interval", "50ms", "size", "16KB"),
			3*rtt + 19*50 + 3 + 25},
		{"multiplex h1: 6 connections, 2 rounds of requests", estCell(TestMultiplex, model.ProtoH1, "builtin", "delay 25ms", "delay 25ms", "objects", "8", "size", "1KB"),
			4*rtt + 8000*8/estCapTCP*1000 + 3 + 25},
		{"page h2 cold: handshake, document, objects", estCell(TestPage, model.ProtoH2, "builtin", "delay 25ms", "delay 25ms", "objects", "10", "size", "1KB", "connection", "cold"),
			4*rtt + 10000*8/estCapTCP*1000 + 3 + 25},
		{"page h2 warm: connect+echo first", estCell(TestPage, model.ProtoH2, "builtin", "delay 25ms", "delay 25ms", "objects", "10", "size", "1KB", "connection", "warm"),
			5*rtt + 10000*8/estCapTCP*1000 + 3 + 25},
		{"page h3 chromium: browser's overhead and work, no drain", estCell(TestPage, model.ProtoH3, "chromium", "delay 25ms", "delay 25ms", "objects", "10", "size", "1KB", "connection", "cold"),
			3*rtt + 10000*8/estCapQUIC*1000 + 120 + 3 + stackMs("chromium", "overhead")},
		{"page h2 firefox: its own overhead", estCell(TestPage, model.ProtoH2, "firefox", "delay 25ms", "delay 25ms", "objects", "10", "size", "1KB", "connection", "cold"),
			4*rtt + 10000*8/estCapTCP*1000 + stackMs("firefox", "work") + 3 + stackMs("firefox", "overhead")},
		// A test in the bench page: the page's script and its /echo (2
		// round trips), the browser's work for the page, then the test as
		// the built-in client's, and the browser's overhead.
		{"ttfb h3 in chromium's bench page", estCell(TestTTFB, model.ProtoH3, "chromium", "delay 25ms", "delay 25ms", "size", "1KB"),
			2*rtt + 1000*8/estCapQUIC*1000 + 2*rtt + 120 + 3 + stackMs("chromium", "overhead")},
		{"latency h2 in firefox's bench page", estCell(TestLatency, model.ProtoH2, "firefox", "delay 25ms", "delay 25ms", "requests", "20", "size", "0B"),
			(2+1+20)*rtt + 2*rtt + stackMs("firefox", "work") + 3 + stackMs("firefox", "overhead")},
	}
	for _, tc := range cases {
		got, err := EstimateSample(&tc.c, time.Minute)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if want := ms(tc.want); !nearDur(got, want) {
			t.Errorf("%s: %v, want %v", tc.name, got, want)
		}
	}
}

func TestEstimateUploadUsesUpDirection(t *testing.T) {
	up := estCell(TestUpload, model.ProtoH2, "builtin", "rate 1mbit", "", "size", "1MB")
	down := estCell(TestDownload, model.ProtoH2, "builtin", "rate 1mbit", "", "size", "1MB")
	u := mustEstimate(t, &up, 0)
	d := mustEstimate(t, &down, 0)
	if u < 8*time.Second || d > time.Second {
		t.Errorf("upload over a 1 Mbit/s up link %v (want > 8 s), download %v (want < 1 s)", u, d)
	}
}

func TestEstimateTraceAndSite(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "slow.trace")
	// one 1500-byte opportunity every 2 ms: 6 Mbit/s
	if err := os.WriteFile(tr, []byte("2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	withTrace := estCell(TestDownload, model.ProtoH3, "builtin", "", "trace "+tr, "size", "5MB")
	withRate := estCell(TestDownload, model.ProtoH3, "builtin", "", "rate 6mbit", "size", "5MB")
	a := mustEstimate(t, &withTrace, 0)
	b, _ := EstimateSample(&withRate, 0)
	if a != b {
		t.Errorf("trace of mean 6 Mbit/s: %v; rate 6mbit: %v", a, b)
	}
	missing := estCell(TestDownload, model.ProtoH3, "builtin", "", "trace "+filepath.Join(dir, "gone"), "size", "5MB")
	fallback := estCell(TestDownload, model.ProtoH3, "builtin", "", "rate 12mbit", "size", "5MB")
	a = mustEstimate(t, &missing, 0)
	if b, _ := EstimateSample(&fallback, 0); a != b {
		t.Errorf("unreadable trace: %v; want the 12 Mbit/s fallback %v", a, b)
	}

	// A site directory of 19 files and 1,000,000 bytes costs what the
	// generated site-19x1mb does.
	site := filepath.Join(dir, "site")
	if err := os.MkdirAll(filepath.Join(site, "img"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 19 {
		size := 1_000_000 / 19
		if i == 0 {
			size += 1_000_000 % 19
		}
		name := filepath.Join(site, "img", "f"+strings.Repeat("x", i)+".png")
		if err := os.WriteFile(name, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gen := estCell(TestSite, model.ProtoH2, "chromium", "rate 10mbit", "rate 10mbit", "site", "site-19x1mb", "connection", "cold")
	user := estCell(TestSite, model.ProtoH2, "chromium", "rate 10mbit", "rate 10mbit", "site", site, "connection", "cold")
	a, _ = EstimateSample(&gen, 0)
	b = mustEstimate(t, &user, 0)
	if a != b || a < time.Second {
		t.Errorf("generated site %v, directory of the same shape %v", a, b)
	}
}

func TestEstimateSaturates(t *testing.T) {
	// 100,000 requests of 100 MB at 1 kbit/s with 10% loss: far beyond
	// what a Duration holds, an estimate that stays positive.
	c := estCell(TestLatency, model.ProtoH2, "builtin", "rate 1kbit loss 10%", "rate 1kbit loss 10%", "requests", "100000", "size", "100MB")
	d := mustEstimate(t, &c, 0)
	if d != estMax {
		t.Errorf("estimate %v, want the saturated %v", d, estMax)
	}
	if got := (CellEstimate{Sample: d, Samples: 100001}).Total(); got != estMax {
		t.Errorf("cell total %v", got)
	}
	if d, _ := EstimateSample(&c, time.Hour); d != time.Hour+3*time.Millisecond {
		t.Errorf("with a timeout of 1h: %v", d)
	}
}

func TestEstimateErrors(t *testing.T) {
	for _, c := range []model.Cell{
		estCell(TestDownload, model.ProtoH2, "builtin", "delay -5ms", "", "size", "1MB"),
		estCell(TestDownload, model.ProtoH2, "builtin", "", "rate banana", "size", "1MB"),
		estCell(TestDownload, model.ProtoH2, "builtin", "", "", "size", "many"),
		estCell(TestDownload, "h4", "builtin", "", "", "size", "1MB"),
		estCell("teleport", model.ProtoH2, "builtin", "", ""),
		estCell(TestSite, model.ProtoH2, "chromium", "", ""), // site has no default
	} {
		if d, err := EstimateSample(&c, time.Minute); err == nil {
			t.Errorf("cell %s up %q down %q %v: estimate %v, want an error", c.Key, c.LinkUp, c.LinkDown, c.Factors, d)
		} else if !strings.Contains(err.Error(), c.Key) {
			t.Errorf("error %q does not name the cell", err)
		}
	}
	// A parameter a cell stored by an older quicbench lacks takes its default.
	c := estCell(TestPage, model.ProtoH2, "builtin", "", "", "objects", "10", "size", "10KB")
	if _, err := EstimateSample(&c, time.Minute); err != nil {
		t.Errorf("page without connection: %v", err)
	}
	if _, err := (&Plan{}).Estimate(); err == nil {
		t.Error("Estimate of an unparsed plan: no error")
	}
}

func TestEstimatePlanTotal(t *testing.T) {
	p, err := Parse("t.yaml", []byte(`
iterations: 3
warmup: true
protocols: [h2, h3]
timeout: 10s
scenarios:
  - name: clean
  - name: slow
    link: "rate 2mbit delay 20ms loss 1%"
tests:
  - test: download
    params: {size: [100KB, 5MB]}
  - test: ttfb
    iterations: 7
    warmup: false
  - test: page
    timeout: 1s
`))
	if err != nil {
		t.Fatal(err)
	}
	e, err := p.Estimate()
	if err != nil {
		t.Fatal(err)
	}
	cells, _ := p.Expand()
	if len(e.Cells) != len(cells) {
		t.Fatalf("%d cell estimates for %d cells", len(e.Cells), len(cells))
	}
	var sum time.Duration
	for i := range cells {
		c := &cells[i]
		one, err := p.EstimateCell(c)
		if err != nil {
			t.Fatal(err)
		}
		n := c.Iterations
		if c.Warmup {
			n++
		}
		ce := e.Cells[i]
		if ce.Key != c.Key || ce.Sample != one || ce.Samples != n || ce.Total() != one*time.Duration(n) {
			t.Errorf("cell %d: %+v; want key %s, sample %v, %d samples", i, ce, c.Key, one, n)
		}
		if one > p.TimeoutFor(c)+time.Second {
			t.Errorf("cell %s: %v exceeds its timeout %v", c.Key, one, p.TimeoutFor(c))
		}
		sum += one * time.Duration(n)
	}
	if e.Total != sum || sum <= 0 {
		t.Errorf("total %v, sum of cells %v", e.Total, sum)
	}
	// The 5 MB download over the slow link is capped by its 10 s timeout.
	for i, c := range cells {
		if c.Scenario == "slow" && c.Test == TestDownload && strings.Contains(c.Key, "size=5MB") {
			if want := 10*time.Second + 3*time.Millisecond + 20*time.Millisecond; e.Cells[i].Sample != want {
				t.Errorf("%s: %v, want the timeout plus the overheads %v", c.Key, e.Cells[i].Sample, want)
			}
		}
	}
}

func TestEstimateBuiltins(t *testing.T) {
	for _, name := range BuiltinNames() {
		p, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		q, err := p.Quick()
		if err != nil {
			t.Fatal(err)
		}
		for _, pl := range []*Plan{p, q} {
			e, err := pl.Estimate()
			if err != nil {
				t.Errorf("%s: %v", pl.Name, err)
				continue
			}
			if e.Total <= 0 || e.Total > 30*24*time.Hour {
				t.Errorf("%s: estimate %v", pl.Name, e.Total)
			}
			for _, c := range e.Cells {
				if c.Sample <= 0 {
					t.Errorf("%s: cell %s: sample estimate %v", pl.Name, c.Key, c.Sample)
				}
			}
			if pl == q && e.Total > 15*time.Minute {
				t.Errorf("%s: quick variant estimated at %v", pl.Name, e.Total)
			}
		}
	}
	// The quick plan says it finishes in under three minutes.
	p, _ := Builtin("quick")
	if e, _ := p.Estimate(); e.Total > 3*time.Minute || e.Total < time.Minute {
		t.Errorf("quick: estimate %v, want 1-3 minutes", e.Total)
	}
}

func TestFormatEstimate(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{-time.Second, "0s"},
		{300 * time.Millisecond, "<1s"},
		{1499 * time.Millisecond, "1s"},
		{45 * time.Second, "45s"},
		{100 * time.Second, "1m40s"},
		{120 * time.Second, "2m"},
		{9*time.Minute + 59*time.Second, "9m59s"},
		{10*time.Minute + 20*time.Second, "10m"},
		{3*time.Hour + 10*time.Minute + 20*time.Second, "3h10m"},
		{2 * time.Hour, "2h"},
		{9*time.Hour + 59*time.Minute + 50*time.Second, "10h"},
		{21*time.Hour + 20*time.Minute, "21h"},
		{71*time.Hour + 20*time.Minute, "71h"},
		{106 * time.Hour, "4d10h"},
		{96 * time.Hour, "4d"},
	} {
		if got := FormatEstimate(tc.d); got != tc.want {
			t.Errorf("FormatEstimate(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}

// stackMs is a browser client's overhead or work (its stack.yaml's), in
// milliseconds.
func stackMs(client, field string) float64 {
	bc, ok := browserCostOf(client)
	if !ok {
		panic(client + " is no browser client")
	}
	if field == "work" {
		return float64(bc.pageWork) / 1e6
	}
	return float64(bc.overhead) / 1e6
}
