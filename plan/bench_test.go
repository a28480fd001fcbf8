package plan

import (
	"strings"
	"testing"
)

// TestBenchClients checks which tests the chromium client runs in the
// bench page, with which protocols and servers, and the browsers' limits
// that plan validation enforces.
func TestBenchClients(t *testing.T) {
	p := mustParse(t, `
protocols: [h1c, h2, h3, quic]
client: [builtin, chromium]
server: [quicbench, aioquic]
scenarios: [{name: a}]
tests:
  - test: ttfb
  - test: handshake
    protocols: [h3]
    server: [quicbench]
`)
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, keysOf(cells), []string{
		"a/ttfb/size=1KB/h1c/builtin/cubic", "a/ttfb/size=1KB/h2/builtin/cubic", "a/ttfb/size=1KB/h3/builtin/cubic", "a/ttfb/size=1KB/quic/builtin/cubic",
		"a/ttfb/size=1KB/h3/builtin/cubic/aioquic",
		"a/ttfb/size=1KB/h2/chromium/cubic", "a/ttfb/size=1KB/h3/chromium/cubic",
		"a/handshake/mode=full/h3/builtin/cubic",
	})
	notes := strings.Join(p.Notes(), "\n")
	for _, want := range []string{
		"tests[0] (ttfb): protocol h1c skipped for client chromium: the chromium client speaks only h1, h2 and h3, not h1c",
		"tests[0] (ttfb): server aioquic skipped for client chromium: the chromium client runs ttfb in quicbench's bench page, which only quicbench's server serves",
		"tests[1] (handshake): client chromium skipped: the chromium client does not run handshake: a browser owns its connections' life",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	for _, c := range []struct{ name, text, want string }{
		{"ttfb too small", `
scenarios: [{name: a}]
tests:
  - test: ttfb
    client: [builtin, chromium]
    params: {size: [100B, 1KB]}
`, "no protocol can run ttfb size=100B with client chromium: the chromium client measures ttfb on the bench page's document, padded to the size: size 100B is outside 512B..10MB"},
		{"upload too large", `
scenarios: [{name: a}]
tests:
  - test: upload
    client: chromium
    params: {size: 5GB}
`, "no protocol can run upload size=5GB with client chromium: the chromium client holds an upload's body in the page's memory: size 5GB is above 1GB"},
		{"cpu", `
scenarios: [{name: a}]
tests:
  - test: cpu
    client: chromium
`, `tests[0].client: "chromium": the chromium client does not run cpu: a browser's CPU time is spread`},
	} {
		_, err := Parse("plan.yaml", []byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if !IsBenchTest(TestStream) || IsBenchTest(TestPage) || IsBenchTest(TestHandshake) {
		t.Error("IsBenchTest: want stream but not page or handshake")
	}
	if why := BrowserUnsupported(TestTTFB, Params{Size: 100}, "lighthouse"); why != "" {
		t.Errorf("lighthouse has no bench page limits: %q", why)
	}
}

// TestQuickBrowsersOnFirstScenario checks that a quick variant keeps a
// browser client that runs beside the built-in one on the first kept
// scenario only, and a browser-only entry on every kept scenario.
func TestQuickBrowsersOnFirstScenario(t *testing.T) {
	p := mustParse(t, `
protocols: [h3]
client: [builtin, chromium]
scenarios: [{name: a}, {name: b, link: delay 10ms}, {name: c, link: loss 1%}]
tests:
  - test: download
  - test: page
    client: chromium
  - test: cpu
`)
	q, err := p.Quick()
	if err != nil {
		t.Fatal(err)
	}
	cells, err := q.Expand()
	if err != nil {
		t.Fatal(err)
	}
	checkKeys(t, keysOf(cells), []string{
		"a/download/size=1MB/h3/builtin/cubic", "a/download/size=1MB/h3/chromium/cubic",
		"a/page/objects=10,size=10KB,connection=cold/h3/chromium/cubic",
		"a/cpu/size=10MB/h3/builtin/cubic",
		"c/download/size=1MB/h3/builtin/cubic",
		"c/page/objects=10,size=10KB,connection=cold/h3/chromium/cubic",
		"c/cpu/size=10MB/h3/builtin/cubic",
	})
	if n := strings.Join(q.Notes(), "\n"); !strings.Contains(n, "quick: client chromium runs beside the built-in client on each test's first scenario only (a)") {
		t.Errorf("notes:\n%s", n)
	}
}
