package plan

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

func mustParse(t *testing.T, text string) *Plan {
	t.Helper()
	p, err := Parse("plan.yaml", []byte(text))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return p
}

// mustParseH3 parses a plan of one scenario, a, over h3 whose tests are
// tests: the items of its tests list, in YAML.
func mustParseH3(t *testing.T, tests string) *Plan {
	t.Helper()
	return mustParse(t, "protocols: [h3]\nscenarios: [{name: a}]\ntests:"+tests)
}

// keysOf returns the keys of cells, in order.
func keysOf(cells []model.Cell) []string {
	var keys []string
	for _, c := range cells {
		keys = append(keys, c.Key)
	}
	return keys
}

// checkKeys reports keys (the cells' keys) that differ from want.
func checkKeys(t *testing.T, keys, want []string) {
	t.Helper()
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
}

const minimal = `
scenarios:
  - name: a
tests:
  - test: ttfb
`

func TestDefaults(t *testing.T) {
	p := mustParse(t, minimal)
	if p.Name != "plan" || p.Seed != DefaultSeed || p.Timeout != DefaultTimeout {
		t.Errorf("name %q seed %d timeout %v", p.Name, p.Seed, p.Timeout)
	}
	cells, _ := p.Expand()
	var keys []string
	for _, c := range cells {
		keys = append(keys, c.Key)
		if c.Iterations != DefaultIterations || !c.Warmup || c.CC != "cubic" || c.Client != "builtin" || c.Metric != "ttfb_ms" || c.Unit != "ms" || c.HigherIsBetter {
			t.Errorf("cell %+v", c)
		}
	}
	want := []string{"a/ttfb/size=1KB/h1/builtin/cubic", "a/ttfb/size=1KB/h2/builtin/cubic", "a/ttfb/size=1KB/h3/builtin/cubic"}
	checkKeys(t, keys, want)
}

func TestAliases(t *testing.T) {
	p := mustParseH3(t, `
  - test: download
    params: {size: &s [1KB, 2KB]}
  - test: upload
    params: {size: *s}
`)
	if c := p.Counts(); c.Cells != 4 {
		t.Errorf("%d cells; want 4", c.Cells)
	}
}

func TestExpandOrderAndCrossing(t *testing.T) {
	p := mustParse(t, `
protocols: [h3, h2]
cc: [cubic, bbr]
client: builtin
scenarios:
  - name: x
  - grid: {loss: ["1%", "2%"]}
tests:
  - test: multiplex
    params: {size: [1KB, 2KB], objects: [3, 4]}
  - test: download
    scenarios: [loss=2%]
    iterations: 7
    warmup: false
    timeout: 2m
`)
	cells, _ := p.Expand()
	keys := keysOf(cells)
	// scenario, test entry, params (objects first: the test's order), client, cc, protocol
	want := []string{
		"x/multiplex/objects=3,size=1KB/h3/builtin/cubic", "x/multiplex/objects=3,size=1KB/h2/builtin/cubic",
		"x/multiplex/objects=3,size=1KB/h3/builtin/bbr", "x/multiplex/objects=3,size=1KB/h2/builtin/bbr",
		"x/multiplex/objects=3,size=2KB/h3/builtin/cubic", "x/multiplex/objects=3,size=2KB/h2/builtin/cubic",
		"x/multiplex/objects=3,size=2KB/h3/builtin/bbr", "x/multiplex/objects=3,size=2KB/h2/builtin/bbr",
		"x/multiplex/objects=4,size=1KB/h3/builtin/cubic", "x/multiplex/objects=4,size=1KB/h2/builtin/cubic",
		"x/multiplex/objects=4,size=1KB/h3/builtin/bbr", "x/multiplex/objects=4,size=1KB/h2/builtin/bbr",
		"x/multiplex/objects=4,size=2KB/h3/builtin/cubic", "x/multiplex/objects=4,size=2KB/h2/builtin/cubic",
		"x/multiplex/objects=4,size=2KB/h3/builtin/bbr", "x/multiplex/objects=4,size=2KB/h2/builtin/bbr",
	}
	checkKeys(t, keys[:16], want)
	if len(cells) != 16*3+4 {
		t.Fatalf("%d cells; want 52", len(cells))
	}
	last := cells[len(cells)-1]
	if last.Key != "loss=2%/download/size=1MB/h2/builtin/bbr" || last.Iterations != 7 || last.Warmup || last.LinkUp != "loss 2%" {
		t.Errorf("last cell %+v", last)
	}
	if p.TimeoutFor(&last) != 2*time.Minute || p.TimeoutFor(&cells[0]) != DefaultTimeout {
		t.Errorf("timeouts %v %v", p.TimeoutFor(&last), p.TimeoutFor(&cells[0]))
	}
	if c := Count(cells); c != (Counts{Cells: 52, Samples: 48*10 + 4*7, Warmups: 48}) || c.Total() != 48*10+4*7+48 {
		t.Errorf("counts %+v", c)
	}
}

func TestScenarioSpecs(t *testing.T) {
	p := mustParse(t, `
scenarios:
  - name: both
    link: "loss 2%  delay 25ms 10ms"
  - name: split
    up: "rate 5mbit"
    down: "rate 50mbit delay 10ms"
  - name: downonly
    down: delay 5ms
  - name: none
    link: none
  - name: tr
    trace: /x/ATT
    link: delay 30ms
  - name: jit
    grid: {jitter: [5ms], rate: [1gbit]}
    direction: up
    base: "limit 100"
tests:
  - test: ttfb
`)
	want := []Scenario{
		{Name: "both", Up: "delay 25ms 10ms loss 2%", Down: "delay 25ms 10ms loss 2%"},
		{Name: "split", Up: "rate 5mbit", Down: "delay 10ms rate 50mbit"},
		{Name: "downonly", Down: "delay 5ms"},
		{Name: "none"},
		{Name: "tr", Up: "delay 30ms trace /x/ATT.up", Down: "delay 30ms trace /x/ATT.down"},
		{Name: "jit:rate=1gbit,jitter=5ms", Up: "limit 100 delay 0ms 5ms rate 1gbit",
			Factors: []model.Factor{{Name: "rate", Value: "1gbit"}, {Name: "jitter", Value: "5ms"}}},
	}
	if got := p.Scenarios(); !reflect.DeepEqual(got, want) {
		t.Errorf("scenarios\n%+v\nwant\n%+v", got, want)
	}
}

// Bad plans: every message exactly, with its position.
func TestErrors(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"unknown test", `
scenarios:
  - name: a
tests:
  - test: downlaod
`, `plan.yaml:5:11: tests[0].test: "downlaod": unknown test, did you mean "download"? (allowed: latency, ttfb, handshake, download, upload, multiplex, stream, page, site, cpu, fairness)`},
		{"negative size", `
scenarios:
  - name: a
tests:
  - test: ttfb
  - test: download
    params:
      size: -5MB
`, `plan.yaml:8:13: tests[1].params.size: "-5MB": size must be positive (allowed: 1B..100GB)`},
		{"zero size", `
scenarios: [{name: a}]
tests: [{test: upload, params: {size: [1MB, 0]}}]
`, `plan.yaml:3:45: tests[0].params.size[1]: "0": size must be positive (allowed: 1B..100GB)`},
		{"empty grid dimension", `
scenarios:
  - grid:
      rate: [2mbit]
      loss: []
tests:
  - test: ttfb
`, `plan.yaml:5:13: scenarios[0].grid.loss: empty list: the grid would expand to zero scenarios (give at least one value)`},
		{"empty grid", `
scenarios:
  - grid: {}
tests:
  - test: ttfb
`, `plan.yaml:3:11: scenarios[0].grid: empty grid: it would expand to zero scenarios (give at least one of rate, delay, jitter, loss, limit, reorder, duplicate, corrupt)`},
		{"malformed link", `
scenarios:
  - name: a
    link: "delay 25ms lose 2%"
tests:
  - test: ttfb
`, `plan.yaml:4:23: scenarios[0].link: "delay 25ms lose 2%": at "lose": unknown keyword (want one of limit, delay, distribution, loss, duplicate, corrupt, reorder, gap, rate, queue, trace, onoff, mtu, none)`},
		{"negative delay", `
scenarios:
  - name: a
    down: delay -5ms
tests:
  - test: ttfb
`, `plan.yaml:4:17: scenarios[0].down: "delay -5ms": at "-5ms": delay must not be negative`},
		{"bad grid value", `
scenarios:
  - grid:
      loss: ["1%", "150%"]
tests:
  - test: ttfb
`, `plan.yaml:4:21: scenarios[0].grid.loss[1]: "150%": not a valid loss value: at "150%": loss must be at most 100%`},
		{"unknown key", `
scenarios:
  - name: a
tests:
  - test: ttfb
    parms: {size: 1KB}
`, `plan.yaml:6:5: tests[0]: unknown key "parms", did you mean "params"? (allowed: test, iterations, warmup, protocols, client, server, timeout, scenarios, params)`},
		{"unknown top key", `
scenario:
  - name: a
tests:
  - test: ttfb
`, "plan.yaml:2:1: unknown key \"scenario\", did you mean \"scenarios\"? (allowed: name, description, seed, iterations, precision, max_iterations, min_effect, parallel, pin, capture, capture_snap, capture_limit, warmup, protocols, client, server, cc, timeout, browser_restart, browser_memory_limit, browser_files_limit, stacks, missing_bodies, scenarios, tests)\n" +
			"plan.yaml:2:1: scenarios: missing (a plan needs at least one scenario, e.g. - name: baseline)"},
		{"unknown param", `
scenarios: [{name: a}]
tests:
  - test: page
    params: {object: 5}
`, `plan.yaml:5:14: tests[0].params: unknown key "object", did you mean "objects"? (allowed: objects, size, connection)`},
		{"unknown protocol", `
protocols: [h2, http3]
scenarios: [{name: a}]
tests: [{test: ttfb}]
`, `plan.yaml:2:17: protocols[1]: "http3": unknown value (allowed: h1, h1c, h2, h3, tcp, quic)`},
		{"raw transport requested for page", `
scenarios: [{name: a}]
tests:
  - test: page
    protocols: [h2, quic]
`, `plan.yaml:5:21: tests[0].protocols[1]: "quic": the raw quic transport takes part only in download, upload, latency and ttfb tests, not page; remove it from this test's protocols`},
		{"chromium requested for handshake", `
scenarios: [{name: a}]
tests:
  - test: handshake
    client: chromium
`, `plan.yaml:5:13: tests[0].client: "chromium": the chromium client does not run handshake: a browser owns its connections' life: it cannot be told to resume a TLS session or to send 0-RTT data, and does not say whether it did (a browser's ttfb includes a full handshake)`},
		{"lighthouse requested for download", `
scenarios: [{name: a}]
tests:
  - test: download
    client: lighthouse
`, `plan.yaml:5:13: tests[0].client: "lighthouse": the lighthouse client runs only page and site tests, not download`},
		{"chromium with h1c", `
scenarios: [{name: a}]
tests:
  - test: page
    client: chromium
    protocols: [h1c, h2]
`, `plan.yaml:6:17: tests[0].protocols[0]: "h1c": the chromium client speaks only h1, h2 and h3, not h1c`},
		{"lighthouse requested for ttfb", `
scenarios: [{name: a}]
tests:
  - test: ttfb
    client: [builtin, lighthouse]
`, `plan.yaml:5:23: tests[0].client[1]: "lighthouse": the lighthouse client runs only page and site tests, not ttfb`},
		{"lighthouse with h1c", `
scenarios: [{name: a}]
tests:
  - test: site
    client: [lighthouse]
    protocols: [h2, h1c]
`, `plan.yaml:6:21: tests[0].protocols[1]: "h1c": the lighthouse client speaks only h1, h2 and h3, not h1c`},
		{"lighthouse with warm connections", `
scenarios: [{name: a}]
tests:
  - test: site
    client: lighthouse
    params: {site: site-39x3mb, connection: [cold, warm]}
`, `plan.yaml:4:5: tests[0]: no protocol can run site site=site-39x3mb,connection=warm with client lighthouse: the lighthouse client measures cold loads only (Lighthouse navigates a tab of its own and clears the origin's data first, so connections a priming load opened would not be what it measures; use client chromium for connection warm)`},
		{"lighthouse test timeout too short", `
scenarios: [{name: a}]
tests:
  - test: page
    client: [chromium, lighthouse]
    timeout: 40s
`, `plan.yaml:6:14: tests[0].timeout: "40s": the lighthouse client needs a timeout of at least 41s: 1s for the browser's start, 10s for the page's load and 30s for Lighthouse's work after the load`},
		{"lighthouse plan timeout too short", `
timeout: 40500ms
client: [builtin, lighthouse]
scenarios: [{name: a}]
tests:
  - test: ttfb
  - test: page
    client: chromium
  - test: site
    params: {site: site-19x1mb}
`, `plan.yaml:2:10: timeout: "40500ms": tests[2] (site) runs the lighthouse client, which needs a timeout of at least 41s: 1s for the browser's start, 10s for the page's load and 30s for Lighthouse's work after the load; raise the plan's timeout or give the test one of its own`},
		{"unknown client", `
client: lightouse
scenarios: [{name: a}]
tests: [{test: page}]
`, `plan.yaml:2:9: client: "lightouse": unknown value, did you mean "lighthouse"? (allowed: builtin, aioquic, chromium, firefox, lighthouse, ngtcp2, quiche, quinn)`},
		{"plan-level chromium only", `
client: chromium
scenarios: [{name: a}]
tests:
  - test: page
  - test: cpu
`, `plan.yaml:6:5: tests[1]: no client can run cpu: the chromium client does not run cpu: a browser's CPU time is spread over its browser, network, renderer and GPU processes, which do far more than move the bytes, so its CPU per MB is no measure of its HTTP stack; set client: builtin on this test`},
		{"nothing left", `
protocols: [tcp]
scenarios: [{name: a}]
tests:
  - test: multiplex
`, `plan.yaml:5:5: tests[0]: no protocol can run multiplex objects=10,size=100KB with client builtin: the raw tcp transport takes part only in download, upload, latency and ttfb tests, not multiplex`},
		{"0rtt over tcp only", `
scenarios: [{name: a}]
tests:
  - test: handshake
    protocols: [h1, h2]
    params: {mode: [full, 0rtt]}
`, `plan.yaml:4:5: tests[0]: no protocol can run handshake mode=0rtt with client builtin: 0-RTT is measured over h3 only (Go's TLS over TCP sends no early data), not h1; 0-RTT is measured over h3 only (Go's TLS over TCP sends no early data), not h2`},
		{"duplicate cells", `
scenarios: [{name: a}]
tests:
  - test: download
    params: {size: 1MB}
  - test: download
    params: {size: [500KB, 1000KB]}
`, `plan.yaml:6:5: tests[1]: measures cell a/download/size=1MB/h1/builtin/cubic again (already in tests[0]); give the two entries different parameters, scenarios or protocols`},
		{"duplicate scenario", `
scenarios:
  - name: a
  - name: a
    link: loss 1%
tests: [{test: ttfb}]
`, `plan.yaml:4:5: scenarios[1]: "a": scenario name used twice (also scenarios[0]); give each scenario its own name`},
		{"unknown scenario selected", `
scenarios: [{name: a}, {name: b}]
tests:
  - test: ttfb
    scenarios: [c]
`, `plan.yaml:5:17: tests[0].scenarios[0]: "c": no such scenario (allowed: a, b)`},
		{"link and up", `
scenarios:
  - name: a
    link: loss 1%
    up: loss 2%
tests: [{test: ttfb}]
`, `plan.yaml:5:5: scenarios[0]: link and up/down are exclusive: link sets both directions the same, up and down set one each`},
		{"grid and base conflict", `
scenarios:
  - base: delay 10ms
    grid: {delay: [5ms, 10ms]}
tests: [{test: ttfb}]
`, `plan.yaml:4:12: scenarios[0].grid.delay: the base spec already sets delay: set it in the base or in the grid, not both`},
		{"reorder without delay", `
scenarios:
  - grid: {reorder: ["5%"]}
tests: [{test: ttfb}]
`, `plan.yaml:3:5: scenarios[0].grid (point reorder=5%): "reorder 5%": reorder needs a delay: reordered packets are the ones sent without it`},
		{"missing site", `
scenarios: [{name: a}]
tests: [{test: site}]
`, `plan.yaml:3:9: tests[0].params.site: missing: site needs a site (allowed: site-39x3mb, site-19x1mb, site-56x2mb (generated sites), har-1x20, har-6x70, har-15x120 (recorded pages), a HAR file such as ./page.har, or a directory path such as ./mysite)`},
		{"unknown site", `
scenarios: [{name: a}]
tests: [{test: site, params: {site: site-1x1mb}}]
`, `plan.yaml:3:37: tests[0].params.site: "site-1x1mb": unknown generated site (a directory must be written as a path, e.g. ./site-1x1mb) (allowed: site-39x3mb, site-19x1mb, site-56x2mb (generated sites), har-1x20, har-6x70, har-15x120 (recorded pages), a HAR file such as ./page.har, or a directory path such as ./mysite)`},
		{"types", `
iterations: ten
warmup: maybe
timeout: 5
seed: -1
scenarios: [{name: a}]
tests:
  - test: stream
    params: {interval: 50, segments: 2.5, size: [1KB, 1KB]}
`, `plan.yaml:2:13: iterations: "ten": expected an integer (allowed: 1..100000), got a string
plan.yaml:3:9: warmup: "maybe": expected true or false, got a string
plan.yaml:4:10: timeout: "5": duration "5" has no unit (write e.g. 5ms or 5s)
plan.yaml:5:7: seed: "-1": out of range (allowed: 0..18446744073709551615)
plan.yaml:9:24: tests[0].params.interval: "50": duration "50" has no unit (write e.g. 50ms or 50s) (allowed: 0s..1m)
plan.yaml:9:38: tests[0].params.segments: "2.5": not an integer (allowed: an integer, 2..100000)
plan.yaml:9:55: tests[0].params.size[1]: "1KB": listed twice (as 1KB)`},
		{"bad mode", `
scenarios: [{name: a}]
tests: [{test: handshake, params: {mode: zero-rtt}}]
`, `plan.yaml:3:42: tests[0].params.mode: "zero-rtt": unknown mode (allowed: full, resumed, 0rtt)`},
		{"bad connection", `
scenarios: [{name: a}]
tests:
  - test: page
    params: {connection: [cold, hot]}
  - test: site
    params: {site: site-19x1mb, connection: Warm}
  - test: download
    params: {connection: warm}
`, `plan.yaml:5:33: tests[0].params.connection[1]: "hot": unknown connection (allowed: cold, warm)
plan.yaml:7:45: tests[1].params.connection: "Warm": unknown connection (allowed: cold, warm)
plan.yaml:9:14: tests[2].params: unknown key "connection" (allowed: size)`},
		{"empty tests", `
scenarios: [{name: a}]
tests: []
`, `plan.yaml:3:8: tests: empty list: the plan would have zero cells (give at least one of tests)`},
		{"not a mapping", `- a
- b
`, `plan.yaml:1:1: expected a mapping with keys name, description, seed, iterations, precision, max_iterations, min_effect, parallel, pin, capture, capture_snap, capture_limit, warmup, protocols, client, server, cc, timeout, browser_restart, browser_memory_limit, browser_files_limit, stacks, missing_bodies, scenarios, tests, got a list`},
		{"empty", ``, `plan.yaml: empty plan (a plan needs at least scenarios and tests)`},
		{"comment only", "# nothing\n", `plan.yaml: empty plan (a plan needs at least scenarios and tests)`},
		{"syntax", "scenarios: [\n", `plan.yaml:1: YAML syntax: did not find expected node content`},
		{"tabs", "scenarios:\n\t- name: a\n", `plan.yaml:2: YAML syntax: found character that cannot start any token`},
		{"two documents", "scenarios: [{name: a}]\ntests: [{test: ttfb}]\n---\nname: b\n", `plan.yaml:3:1: a second YAML document: a plan file holds one document`},
		{"duplicate key", `
scenarios: [{name: a}]
tests: [{test: ttfb}]
tests: [{test: ttfb}]
`, `plan.yaml:4:1: tests: duplicate key`},
		{"no suggestion for a distant key", `
base: &b {test: ttfb}
`, `plan.yaml:2:1: unknown key "base" (allowed: name, description, seed, iterations, precision, max_iterations, min_effect, parallel, pin, capture, capture_snap, capture_limit, warmup, protocols, client, server, cc, timeout, browser_restart, browser_memory_limit, browser_files_limit, stacks, missing_bodies, scenarios, tests)
plan.yaml:2:1: scenarios: missing (a plan needs at least one scenario, e.g. - name: baseline)
plan.yaml:2:1: tests: missing (a plan needs at least one test, e.g. - test: ttfb)`},
		{"merge key", `
scenarios: [{name: a}]
tests:
  - &t {test: ttfb}
  - <<: *t
    iterations: 3
`, `plan.yaml:5:5: tests[1]: merge keys (<<) are not supported; repeat the fields (allowed: test, iterations, warmup, protocols, client, server, timeout, scenarios, params)
plan.yaml:5:5: tests[1]: missing test (allowed: latency, ttfb, handshake, download, upload, multiplex, stream, page, site, cpu, fairness)`},
		{"too many cells", grid1000 + `    params: {size: [1KB, 2KB, 3KB, 4KB, 5KB, 6KB, 7KB, 8KB, 9KB, 10KB, 11KB, 12KB, 13KB, 14KB, 15KB, 16KB, 17KB, 18KB, 19KB, 20KB, 21KB, 22KB, 23KB, 24KB, 25KB, 26KB, 27KB, 28KB, 29KB, 30KB, 31KB, 32KB, 33KB, 34KB]}
`, `plan.yaml:8:5: tests[0]: the plan expands to more than 100000 cells; split it into several plans`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("plan.yaml", []byte(c.text))
			if err == nil {
				t.Fatalf("no error; want\n%s", c.want)
			}
			if err.Error() != c.want {
				t.Errorf("error\n%s\nwant\n%s", err, c.want)
			}
			var pe *Error
			if !errors.As(err, &pe) || pe.File != "plan.yaml" {
				t.Errorf("error is not a *plan.Error: %T", err)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	p := mustParse(t, `
protocols: [h2, h3, tcp, quic]
client: [builtin, chromium]
scenarios: [{name: a}]
tests:
  - test: download
  - test: page
  - test: handshake
    protocols: [h2]
`)
	want := []string{
		"tests[0] (download): protocol tcp skipped for client chromium: the chromium client speaks only h1, h2 and h3, not tcp",
		"tests[0] (download): protocol quic skipped for client chromium: the chromium client speaks only h1, h2 and h3, not quic",
		"tests[1] (page): protocol tcp skipped: the raw tcp transport takes part only in download, upload, latency and ttfb tests, not page",
		"tests[1] (page): protocol quic skipped: the raw quic transport takes part only in download, upload, latency and ttfb tests, not page",
		"tests[2] (handshake): client chromium skipped: the chromium client does not run handshake: a browser owns its connections' life: it cannot be told to resume a TLS session or to send 0-RTT data, and does not say whether it did (a browser's ttfb includes a full handshake)",
	}
	if got := p.Notes(); !reflect.DeepEqual(got, want) {
		t.Errorf("notes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cells, _ := p.Expand()
	checkKeys(t, keysOf(cells), []string{
		"a/download/size=1MB/h2/builtin/cubic", "a/download/size=1MB/h3/builtin/cubic",
		"a/download/size=1MB/tcp/builtin/cubic", "a/download/size=1MB/quic/builtin/cubic",
		"a/download/size=1MB/h2/chromium/cubic", "a/download/size=1MB/h3/chromium/cubic",
		"a/page/objects=10,size=10KB,connection=cold/h2/builtin/cubic", "a/page/objects=10,size=10KB,connection=cold/h3/builtin/cubic",
		"a/page/objects=10,size=10KB,connection=cold/h2/chromium/cubic", "a/page/objects=10,size=10KB,connection=cold/h3/chromium/cubic",
		"a/handshake/mode=full/h2/builtin/cubic",
	})
}

// TestLighthouseCells checks the lighthouse client's cells: page and site
// tests only, h1/h2/h3 only, Lighthouse's score as the primary metric
// (higher is better), beside chromium cells of the same test that keep
// the page load time.
func TestLighthouseCells(t *testing.T) {
	p := mustParse(t, `
protocols: [h1c, h2, h3]
client: [chromium, lighthouse]
scenarios: [{name: a}]
tests:
  - test: site
    params: {site: site-19x1mb}
`)
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]model.Cell{}
	for _, c := range cells {
		got[c.Key] = c
	}
	if len(cells) != 4 {
		t.Errorf("%d cells, want 4 (h2 and h3 for each browser client)", len(cells))
	}
	lh, ok := got["a/site/site=site-19x1mb,connection=cold/h3/lighthouse/cubic"]
	if !ok || lh.Metric != "lh_score" || lh.Unit != "points" || !lh.HigherIsBetter || lh.Group != "a/site/site=site-19x1mb,connection=cold/lighthouse/cubic" {
		t.Errorf("lighthouse cell %+v", lh)
	}
	ch, ok := got["a/site/site=site-19x1mb,connection=cold/h3/chromium/cubic"]
	if !ok || ch.Metric != "plt_ms" || ch.HigherIsBetter {
		t.Errorf("chromium cell %+v", ch)
	}
	notes := strings.Join(p.Notes(), "\n")
	for _, c := range []string{"chromium", "lighthouse"} {
		if !strings.Contains(notes, "protocol h1c skipped for client "+c+": the "+c+" client speaks only h1, h2 and h3, not h1c") {
			t.Errorf("no note on h1c for %s in\n%s", c, notes)
		}
	}
	ec, err := p.EstimateCell(&lh)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := p.EstimateCell(&ch)
	if err != nil {
		t.Fatal(err)
	}
	lhs, _ := peers.ClientStack("lighthouse")
	chs, _ := peers.ClientStack("chromium")
	want := time.Duration(lhs.Client.AfterLoad) + time.Duration(lhs.Client.Overhead) - time.Duration(chs.Client.Overhead)
	if want <= 0 || ec-cc != want {
		t.Errorf("lighthouse sample estimated %v, chromium %v: want a difference of %v (its audit after the load and its overhead beyond Chromium's)", ec, cc, want)
	}
}

// TestLighthouseMinTimeout: a lighthouse cell's timeout may be exactly
// LighthouseMinTimeout, set on the test or on the plan; a test's own
// timeout overrides a shorter one of the plan's, which the tests without
// the lighthouse client keep.
func TestLighthouseMinTimeout(t *testing.T) {
	p := mustParse(t, `
timeout: 10s
scenarios: [{name: a}]
tests:
  - test: page
    client: [chromium, lighthouse]
    timeout: 41s
  - test: ttfb
`)
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		want := 10 * time.Second
		if c.Test == "page" {
			want = 41 * time.Second
		}
		if got := p.TimeoutFor(&c); got != want {
			t.Errorf("%s: timeout %v, want %v", c.Key, got, want)
		}
	}
	mustParse(t, `
timeout: 41s
client: lighthouse
scenarios: [{name: a}]
tests: [{test: page}]
`)
}

func TestHash(t *testing.T) {
	const baseText = `
name: one
seed: 7
protocols: [h2, h3]
scenarios:
  - name: a
    link: delay 10ms loss 1%
tests:
  - test: download
    params: {size: 1MB}
`
	base := mustParse(t, baseText)
	// Pinned: the hash must not change between versions for the same plan,
	// or runs could not be resumed after an upgrade. Update deliberately.
	const pinned = "3fc239fdf924a5caff84b74c0253aad4afc9e94e5e3871f8500cc591b81a4192"
	if got := base.Hash(); got != pinned {
		t.Errorf("hash %s; pinned %s", got, pinned)
	}
	same := mustParse(t, `# reformatted, renamed, reordered, respelled
tests: [{params: {size: 1000KB}, test: download}]
scenarios: [{link: "loss 1%   delay 10ms", name: a}]
protocols:
  - h2
  - h3
seed: 7
name: two
description: something else
`)
	if same.Hash() != base.Hash() {
		t.Error("equivalent plans hash differently")
	}
	changes := map[string]string{
		"seed":       "seed: 8",
		"iterations": "iterations: 11",
		"warmup":     "warmup: false",
		"timeout":    "timeout: 61s",
		"protocol":   "protocols: [h3, h2]",
		"cc":         "cc: bbr",
	}
	for what, line := range changes {
		text := strings.Replace(baseText, "seed: 7\nprotocols: [h2, h3]", "seed: 7\nprotocols: [h2, h3]\n"+line, 1)
		if what == "seed" || what == "protocol" {
			text = strings.Replace(text, "seed: 7\n", "", 1)
			if what == "protocol" {
				text = strings.Replace(text, "protocols: [h2, h3]\n", "seed: 7\n", 1)
			}
		}
		p := mustParse(t, text)
		if p.Hash() == base.Hash() {
			t.Errorf("changing %s does not change the hash", what)
		}
	}
	for what, text := range map[string]string{
		"link":  "scenarios: [{name: a, link: delay 10ms loss 2%}]\ntests: [{test: download}]",
		"size":  "scenarios: [{name: a, link: delay 10ms loss 1%}]\ntests: [{test: download, params: {size: 2MB}}]",
		"name":  "scenarios: [{name: b, link: delay 10ms loss 1%}]\ntests: [{test: download}]",
		"test":  "scenarios: [{name: a, link: delay 10ms loss 1%}]\ntests: [{test: upload}]",
		"tmout": "scenarios: [{name: a, link: delay 10ms loss 1%}]\ntests: [{test: download, timeout: 2m}]",
	} {
		p := mustParse(t, "seed: 7\nprotocols: [h2, h3]\n"+text)
		if p.Hash() == base.Hash() {
			t.Errorf("changing the %s does not change the hash", what)
		}
	}
	// The exported fields take part.
	s := mustParse(t, minimal)
	h := s.Hash()
	s.Seed++
	if s.Hash() == h {
		t.Error("Seed is not in the hash")
	}
	s.Seed--
	s.Timeout++
	if s.Hash() == h {
		t.Error("Timeout is not in the hash")
	}
}

func TestYAMLAfterChange(t *testing.T) {
	p := mustParse(t, "# comment\n"+minimal)
	if !strings.HasPrefix(string(p.YAML()), "# comment") {
		t.Error("YAML() of an unchanged plan is not its source")
	}
	p.Seed = 42
	y := string(p.YAML())
	if strings.Contains(y, "# comment") || !strings.Contains(y, "seed: 42") {
		t.Errorf("YAML() after a change:\n%s", y)
	}
	q := mustParse(t, y)
	if q.Hash() != p.Hash() {
		t.Error("rendered YAML does not parse to the same plan")
	}
}

func TestLoadResolvesPaths(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "traces"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"traces/lte.up", "traces/lte.down"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("1\n2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "mysite"), 0o755); err != nil {
		t.Fatal(err)
	}
	text := `
scenarios:
  - name: lte
    trace: traces/lte
tests:
  - test: site
    params: {site: [./mysite, site-19x1mb]}
`
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := p.Scenarios()[0]
	if sc.Up != "trace "+filepath.Join(dir, "traces/lte.up") || sc.Down != "trace "+filepath.Join(dir, "traces/lte.down") {
		t.Errorf("scenario %+v", sc)
	}
	cells, _ := p.Expand()
	if v, _ := cells[0].Factor("site"); v != filepath.Join(dir, "mysite") {
		t.Errorf("site %q", v)
	}
	// The text says "traces/lte" but the plan means an absolute path: YAML()
	// must say what the plan means.
	q, err := Parse("elsewhere.yaml", p.YAML())
	if err != nil || q.Hash() != p.Hash() {
		t.Errorf("YAML() of a loaded plan does not reproduce it: %v", err)
	}
	// Missing files are errors with their position.
	if err := os.Remove(filepath.Join(dir, "traces/lte.down")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "mysite")); err != nil {
		t.Fatal(err)
	}
	_, err = Load(path)
	want := path + ":4:12: scenarios[0].trace: \"traces/lte\": cannot read " + filepath.Join(dir, "traces/lte.down") + ": no such file or directory\n" +
		path + ":7:21: tests[0].params.site[0]: \"./mysite\": site directory " + filepath.Join(dir, "mysite") +
		" does not exist (allowed: site-39x3mb, site-19x1mb, site-56x2mb (generated sites), har-1x20, har-6x70, har-15x120 (recorded pages), a HAR file such as ./page.har, or a directory path such as ./mysite)"
	if err == nil || err.Error() != want {
		t.Errorf("error\n%v\nwant\n%s", err, want)
	}
	if _, err := Load(filepath.Join(dir, "nope.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestCellParams(t *testing.T) {
	p := mustParseH3(t, `
  - test: stream
    params: {segments: 30, interval: 1.5s, size: 1MiB}
  - test: latency
  - test: handshake
    params: {mode: resumed}
  - test: site
    params: {site: ./x}
`)
	cells, _ := p.Expand()
	want := []Params{
		{Segments: 30, Interval: 1500 * time.Millisecond, Size: 1 << 20},
		{Requests: 20},
		{Mode: "resumed"},
		{Site: "./x", Connection: ConnCold},
	}
	for i, c := range cells {
		got, err := CellParams(&c)
		if err != nil || got != want[i] {
			t.Errorf("%s: %+v, %v; want %+v", c.Key, got, err, want[i])
		}
	}
	bad := model.Cell{Key: "k", Test: "page", Factors: []model.Factor{{Name: "objects", Value: "x"}, {Name: "size", Value: "1KB"}}}
	if _, err := CellParams(&bad); err == nil || err.Error() != `cell k: parameter objects: strconv.Atoi: parsing "x": invalid syntax` {
		t.Errorf("bad cell: %v", err)
	}
	bad = model.Cell{Key: "k", Test: "page"}
	if _, err := CellParams(&bad); err == nil || err.Error() != "cell k: missing parameter objects" {
		t.Errorf("bad cell: %v", err)
	}
}

func TestConnectionParam(t *testing.T) {
	p := mustParse(t, `
protocols: [h2, h3]
client: [builtin, chromium]
scenarios: [{name: a}]
tests:
  - test: page
    params: {objects: 4, connection: [cold, warm]}
  - test: site
    client: chromium
    params: {site: site-19x1mb, connection: warm}
  - test: site
    client: chromium
    protocols: [h3]
    params: {site: site-56x2mb}
`)
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	conn := map[string]string{}
	for _, c := range cells {
		keys = append(keys, c.Key)
		cp, err := CellParams(&c)
		if err != nil {
			t.Fatalf("%s: %v", c.Key, err)
		}
		conn[c.Key] = cp.Connection
	}
	want := []string{
		"a/page/objects=4,size=10KB,connection=cold/h2/builtin/cubic", "a/page/objects=4,size=10KB,connection=cold/h3/builtin/cubic",
		"a/page/objects=4,size=10KB,connection=cold/h2/chromium/cubic", "a/page/objects=4,size=10KB,connection=cold/h3/chromium/cubic",
		"a/page/objects=4,size=10KB,connection=warm/h2/builtin/cubic", "a/page/objects=4,size=10KB,connection=warm/h3/builtin/cubic",
		"a/page/objects=4,size=10KB,connection=warm/h2/chromium/cubic", "a/page/objects=4,size=10KB,connection=warm/h3/chromium/cubic",
		"a/site/site=site-19x1mb,connection=warm/h2/chromium/cubic", "a/site/site=site-19x1mb,connection=warm/h3/chromium/cubic",
		"a/site/site=site-56x2mb,connection=cold/h3/chromium/cubic",
	}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	for k, v := range conn {
		wantConn := ConnCold
		if strings.Contains(k, "connection=warm") {
			wantConn = ConnWarm
		}
		if v != wantConn {
			t.Errorf("%s: connection %q, want %q", k, v, wantConn)
		}
	}
	// Cold and warm cells of one configuration are distinct groups, each
	// with its protocols paired inside.
	groups := map[string]int{}
	for _, c := range cells {
		groups[c.Group]++
	}
	for _, g := range []string{"a/page/objects=4,size=10KB,connection=cold/chromium/cubic", "a/page/objects=4,size=10KB,connection=warm/chromium/cubic"} {
		if groups[g] != 2 {
			t.Errorf("group %s has %d cells, want 2 (h2 and h3)", g, groups[g])
		}
	}
	// The canonical rendering keeps the parameter.
	q, err := Parse("render.yaml", p.YAML())
	if err != nil {
		t.Fatalf("rendered plan: %v\n%s", err, p.YAML())
	}
	if q.Hash() != p.Hash() {
		t.Errorf("rendered plan hashes differently:\n%s", p.YAML())
	}
	// The quick variant keeps the connection values.
	quick, err := p.Quick()
	if err != nil {
		t.Fatal(err)
	}
	qc, _ := quick.Expand()
	warm := 0
	for _, c := range qc {
		if v, _ := c.Factor("connection"); v == ConnWarm {
			warm++
		}
	}
	if warm == 0 {
		t.Errorf("the quick plan lost the warm cells")
	}
}

func TestQuickPrunesRepeats(t *testing.T) {
	p := mustParse(t, `
iterations: 50
protocols: [h2, h3]
scenarios:
  - name: a
  - name: b
  - name: c
tests:
  - test: download
    params: {size: [5KB, 5MB]}
  - test: download
    params: {size: [2MB, 3MB]}
  - test: cpu
    scenarios: [b]
    params: {size: 700MB}
`)
	q, err := p.Quick()
	if err != nil {
		t.Fatal(err)
	}
	cells, _ := q.Expand()
	var keys []string
	for _, c := range cells {
		keys = append(keys, c.Key)
		if c.Iterations != 2 || c.Warmup {
			t.Errorf("%s: iterations %d warm-up %t", c.Key, c.Iterations, c.Warmup)
		}
	}
	// Scenarios a and c (first and last) plus b for the cpu test; tests[1]'s
	// 2MB and 3MB are both capped to 1MB, which tests[0] has: dropped.
	want := []string{
		"a/download/size=5KB/h2/builtin/cubic", "a/download/size=5KB/h3/builtin/cubic",
		"a/download/size=1MB/h2/builtin/cubic", "a/download/size=1MB/h3/builtin/cubic",
		"b/download/size=5KB/h2/builtin/cubic", "b/download/size=5KB/h3/builtin/cubic",
		"b/download/size=1MB/h2/builtin/cubic", "b/download/size=1MB/h3/builtin/cubic",
		"b/cpu/size=10MB/h2/builtin/cubic", "b/cpu/size=10MB/h3/builtin/cubic",
		"c/download/size=5KB/h2/builtin/cubic", "c/download/size=5KB/h3/builtin/cubic",
		"c/download/size=1MB/h2/builtin/cubic", "c/download/size=1MB/h3/builtin/cubic",
	}
	checkKeys(t, keys, want)
	if n := q.Notes(); len(n) != 1 || n[0] != "quick: tests[1] (download) dropped: once capped it repeats cells of an earlier test" {
		t.Errorf("notes %q", n)
	}
}

func TestQuickKeepsPartialEntries(t *testing.T) {
	p := mustParseH3(t, `
  - test: download
    params: {size: 1MB}
  - test: download
    params: {size: [8KB, 9MB]}
`)
	q, err := p.Quick()
	if err != nil {
		t.Fatal(err)
	}
	cells, _ := q.Expand()
	if len(cells) != 2 || cells[1].Key != "a/download/size=8KB/h3/builtin/cubic" {
		t.Errorf("cells %v", cells)
	}
	if n := q.Notes(); len(n) != 1 || !strings.Contains(n[0], "tests[1] (download) lost parameter values") {
		t.Errorf("notes %q", n)
	}
}

// Every ```yaml block of docs/plan-format.md is a valid plan.
func TestDocsExamples(t *testing.T) {
	data, err := os.ReadFile("../docs/plan-format.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(data, -1)
	if len(blocks) < 6 {
		t.Fatalf("only %d yaml examples found", len(blocks))
	}
	for i, b := range blocks {
		if _, err := Parse("plan-format.md example "+string(rune('A'+i)), b[1]); err != nil {
			t.Errorf("example %d does not parse: %v\n%s", i+1, err, b[1])
		}
	}
	// The table of built-in plans in the docs matches the plans.
	for _, name := range BuiltinNames() {
		c := builtinCounts[name]
		row := "| `" + name + "` | " + itoa(c.Cells) + " | " + itoa(c.Total()) + " |"
		if !strings.Contains(string(data), row) {
			t.Errorf("docs table lacks row %q", row)
		}
	}
}

func itoa(n int) string {
	s := ""
	for {
		s = string(rune('0'+n%10)) + s
		n /= 10
		if n == 0 {
			return s
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range BuiltinNames() {
		b, _ := BuiltinYAML(name)
		f.Add(b)
	}
	f.Add([]byte(minimal))
	f.Add([]byte("scenarios: [{grid: {rate: [1mbit], jitter: [1ms]}, base: loss 1%}]\ntests: [{test: handshake, params: {mode: [full, 0rtt]}}]"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if p != nil {
				t.Fatal("plan and error")
			}
			var l ErrorList
			if !errors.As(err, &l) || len(l) == 0 {
				t.Fatalf("error %T is not an ErrorList", err)
			}
			return
		}
		cells, err := p.Expand()
		if err != nil || len(cells) == 0 {
			t.Fatalf("parsed plan does not expand: %v", err)
		}
		r, err := Parse("rendered.yaml", p.render())
		if err != nil {
			t.Fatalf("rendering does not parse: %v\n%s", err, p.render())
		}
		if r.Hash() != p.Hash() {
			t.Fatalf("rendering changes the plan\n%s", p.render())
		}
		if _, err := p.Quick(); err != nil {
			t.Fatalf("Quick: %v", err)
		}
	})
}

func BenchmarkParseBuiltins(b *testing.B) {
	var texts [][]byte
	for _, n := range BuiltinNames() {
		t, _ := BuiltinYAML(n)
		texts = append(texts, t)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range texts {
			if _, err := Parse("b.yaml", t); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// grid1000 is the start of a plan of a 10 x 10 x 10 grid (1000 scenarios)
// and one download test, whose params follow.
const grid1000 = `
scenarios:
  - grid:
      rate: [1mbit, 2mbit, 3mbit, 4mbit, 5mbit, 6mbit, 7mbit, 8mbit, 9mbit, 10mbit]
      delay: [1ms, 2ms, 3ms, 4ms, 5ms, 6ms, 7ms, 8ms, 9ms, 10ms]
      loss: ["1%", "2%", "3%", "4%", "5%", "6%", "7%", "8%", "9%", "10%"]
tests:
  - test: download
`

// A 10 x 10 x 10 grid (1000 scenarios) x 10 sizes x 3 protocols = 30,000 cells.
func BenchmarkParseLargeGrid(b *testing.B) {
	text := []byte(grid1000 + `    params: {size: [1KB, 2KB, 3KB, 4KB, 5KB, 6KB, 7KB, 8KB, 9KB, 10KB]}
`)
	b.ReportAllocs()
	for b.Loop() {
		p, err := Parse("b.yaml", text)
		if err != nil {
			b.Fatal(err)
		}
		if p.Counts().Cells != 30000 {
			b.Fatal("wrong count")
		}
		_ = p.Hash()
	}
}

// DecodeParams decodes with the tests' own defaults (the page's size is
// 10KB) and never falls back: a value that does not parse, or is out of
// the test's limits, is an error.
func TestDecodeParams(t *testing.T) {
	got, err := DecodeParams(TestPage, nil)
	if want := (Params{Objects: 10, Size: 10 * kb, Connection: ConnCold}); err != nil || got != want {
		t.Errorf("page defaults %+v, %v; want %+v", got, err, want)
	}
	got, err = DecodeParams(TestStream, map[string]string{"interval": "2ms", "size": "1MiB"})
	if want := (Params{Segments: 20, Interval: 2 * time.Millisecond, Size: 1 << 20}); err != nil || got != want {
		t.Errorf("stream %+v, %v; want %+v", got, err, want)
	}
	for _, c := range []struct {
		test   string
		values map[string]string
		want   string
	}{
		{TestPage, map[string]string{"objects": "x"}, `parameter objects: strconv.Atoi: parsing "x": invalid syntax`},
		{TestPage, map[string]string{"size": ""}, "parameter size: empty size"},
		{TestPage, map[string]string{"connection": "hot"}, `parameter connection "hot": unknown connection (allowed: cold, warm)`},
		{TestLatency, map[string]string{"requests": "0"}, `parameter requests "0": requests out of range (allowed: an integer, 1..100000)`},
		{TestStream, map[string]string{"interval": "50"}, `parameter interval: duration "50" has no unit (write e.g. 50ms or 50s)`},
		{TestSite, nil, "missing parameter site"},
		{"nope", nil, `unknown test "nope"`},
	} {
		if _, err := DecodeParams(c.test, c.values); err == nil || err.Error() != c.want {
			t.Errorf("%s %v: %v, want %s", c.test, c.values, err, c.want)
		}
	}
	if err := CheckParams(TestDownload, Params{Size: -5}); err == nil {
		t.Error("CheckParams accepted a negative download size")
	}
}
