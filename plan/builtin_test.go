package plan

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// Cell and sample counts of the built-in plans, computed by hand from the
// study designs (see each plan's comments).
var builtinCounts = map[string]Counts{
	// 2 scenarios x 5 tests x 3 protocols = 30 cells, ttfb's 6 with 20
	// iterations and the others 10, plus the page in Chromium over the
	// lossy link: 3 cells x 10; a warm-up each.
	"quick": {Cells: 33, Samples: 390, Warmups: 33},
	// Study A, per scenario and protocol: latency, ttfb, download 5MB, upload,
	// multiplex 10x100KB, multiplex 4x1MB, stream, download 3.4MB, multiplex
	// 3x3.4MB, page = 10 cells, plus handshake full/resumed (h2) and
	// full/resumed/0rtt (h3) = 5 cells: (10x2 + 5) x 4 scenarios = 100 cells.
	// Samples per scenario: 100 x 2 (latency) + 100 x 2 (ttfb) + 30 x 5
	// (handshake) + 30 x 2 x 2 (download, upload) + 100 x 2 (multiplex) +
	// 100 x 2 (HOL) + 100 x 2 (stream) + 30 x 2 x 2 (media) + 30 x 2 (page)
	// = 1450; x 4 = 5800.
	// Chromium and Firefox run every entry but the handshake's: 2 browsers
	// x 9 entries x 4 scenarios x 2 protocols more, with the same
	// iterations (the page entry already had both browsers).
	"degraded-networks": {Cells: 252, Samples: 15960, Warmups: 252},
	// Study B: 48 configurations (12 grid points x 4 pages) x 3 protocols.
	"page-load-grid": {Cells: 144, Samples: 14400, Warmups: 144},
	// Per scenario: ttfb and download, each by the built-in client (h2, h3
	// from quicbench and Caddy; h3 from aioquic) and aioquic's client (h3
	// from the three servers) = 8 cells each; page by the built-in client,
	// Chromium and Firefox, 5 cells each = 15. (8 + 8 + 15) x 3 = 93 cells.
	// Counted: 24 x 10 + 24 x 8 + 15 x 8 + 30 x 4 = 672.
	"implementations": {Cells: 117, Samples: 1638, Warmups: 117},
	// Study C: 5 cases x 4 sizes x 2 protocols, 5 repetitions.
	"image-transfer": {Cells: 40, Samples: 200, Warmups: 40},
	// Study D: 3 sites x 3 protocols, 30 loads in Chromium and 10
	// Lighthouse audits.
	"three-sites": {Cells: 18, Samples: 360, Warmups: 18},
	// Study E: (5 rates x 4 losses + 5 jitter points) x 4 sizes x 2
	// protocols = 200 download cells without warm-up, + 2 cpu cells with;
	// 10 iterations.
	"size-bandwidth-grid": {Cells: 202, Samples: 2020, Warmups: 2},
	// Issue 20: 8 fairness scenarios x 2 protocols x 6 iterations + 4
	// latency scenarios x 2 protocols x 10 iterations, no warm-up.
	"fairness": {Cells: 24, Samples: 176, Warmups: 0},
	// check-parallel's plan: 4 grid points x 3 pages x 3 protocols, 20
	// iterations.
	"parallel-check": {Cells: 36, Samples: 720, Warmups: 36},
}

// Quick variants: 2 iterations, no warm-up.
var quickCounts = map[string]int{
	"implementations": 78, // two of the three scenarios
	"quick":           33, // both scenarios kept, the page test's Chromium entry on its one
	// baseline + bad-network; 3.4MB download capped to 1MB repeats the 5MB
	// one (dropped); handshake keeps full and 0rtt: per scenario 9 x 2 + 3 = 21;
	// Chromium and Firefox on baseline only (quickBrowsers): 2 x 9 x 2 more.
	"degraded-networks":   78,
	"page-load-grid":      12, // 1 grid point x pages {5,50} x {4KB,128KB} x 3
	"image-transfer":      8,  // none + loss-5 x {12KB, 1MB} x 2
	"three-sites":         12, // first and last site x 3, for each of the two clients
	"size-bandwidth-grid": 6,  // 1 point x {5KB, 1MB} x 2 + gigabit cpu x 2
	"parallel-check":      9,  // 1 grid point x 3 pages x 3
	"fairness":            12, // 10 Mbit/s 20 ms fairness of both queues + 4 latency scenarios, x 2 protocols x 2
}

func TestBuiltinCounts(t *testing.T) {
	if got := BuiltinNames(); len(got) != len(builtinCounts) {
		t.Fatalf("BuiltinNames() = %v; want the %d plans of builtinCounts", got, len(builtinCounts))
	}
	for _, name := range BuiltinNames() {
		p, err := Builtin(name)
		if err != nil {
			t.Fatalf("Builtin(%q): %v", name, err)
		}
		if p.Name != name {
			t.Errorf("plan %s is named %q inside", name, p.Name)
		}
		if got, want := p.Counts(), builtinCounts[name]; got != want {
			t.Errorf("%s: counts %+v; want %+v", name, got, want)
		}
		q, err := p.Quick()
		if err != nil {
			t.Fatalf("%s: Quick: %v", name, err)
		}
		qc := q.Counts()
		if qc.Cells != quickCounts[name] || qc.Samples != QuickIterations*qc.Cells || qc.Warmups != 0 {
			t.Errorf("%s quick: counts %+v; want %d cells x %d iterations, no warm-up", name, qc, quickCounts[name], QuickIterations)
		}
	}
}

func TestBuiltinsKeepEveryTestInQuick(t *testing.T) {
	for _, name := range BuiltinNames() {
		p, _ := Builtin(name)
		q, _ := p.Quick()
		full, _ := p.Expand()
		small, _ := q.Expand()
		set := func(cells []model.Cell, f func(*model.Cell) string) map[string]bool {
			m := map[string]bool{}
			for i := range cells {
				m[f(&cells[i])] = true
			}
			return m
		}
		for what, f := range map[string]func(*model.Cell) string{
			"test":     func(c *model.Cell) string { return c.Test },
			"protocol": func(c *model.Cell) string { return c.Protocol },
			"client":   func(c *model.Cell) string { return c.Client },
			"cc":       func(c *model.Cell) string { return c.CC },
		} {
			if a, b := set(full, f), set(small, f); !reflect.DeepEqual(a, b) {
				t.Errorf("%s quick: %ss %v; the full plan has %v", name, what, b, a)
			}
		}
		if q.Name != name+"-quick" {
			t.Errorf("quick variant of %s is named %q", name, q.Name)
		}
	}
}

func TestBuiltinRoundTrip(t *testing.T) {
	for _, name := range BuiltinNames() {
		text, err := BuiltinYAML(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(text, []byte("\n# ")) && !bytes.HasPrefix(text, []byte("# ")) {
			t.Errorf("%s: the YAML has no comments", name)
		}
		p, err := Parse("copy.yaml", text)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := Builtin(name)
		assertSamePlan(t, name+" (BuiltinYAML)", b, p)
		if !bytes.Equal(p.YAML(), text) {
			t.Errorf("%s: YAML() of an unchanged plan is not its source text", name)
		}
		// The canonical rendering parses back to the same plan.
		r, err := Parse("rendered.yaml", p.render())
		if err != nil {
			t.Fatalf("%s: rendered YAML does not parse: %v\n%s", name, err, p.render())
		}
		assertSamePlan(t, name+" (rendered)", p, r)
		// So does the quick variant's.
		q, _ := p.Quick()
		q2, err := Parse("quick.yaml", q.YAML())
		if err != nil {
			t.Fatalf("%s quick: %v", name, err)
		}
		assertSamePlan(t, name+" (quick)", q, q2)
	}
}

func assertSamePlan(t *testing.T, what string, a, b *Plan) {
	t.Helper()
	ca, _ := a.Expand()
	cb, _ := b.Expand()
	if !reflect.DeepEqual(ca, cb) {
		t.Errorf("%s: cells differ", what)
	}
	if a.Hash() != b.Hash() {
		t.Errorf("%s: hash %s != %s", what, a.Hash(), b.Hash())
	}
	if !reflect.DeepEqual(a.Scenarios(), b.Scenarios()) {
		t.Errorf("%s: scenarios differ", what)
	}
	for i := range ca {
		if a.TimeoutFor(&ca[i]) != b.TimeoutFor(&ca[i]) {
			t.Errorf("%s: timeout of %s differs", what, ca[i].Key)
		}
	}
}

func TestBuiltinKeys(t *testing.T) {
	for _, name := range BuiltinNames() {
		p, _ := Builtin(name)
		cells, _ := p.Expand()
		seen := map[string]bool{}
		for _, c := range cells {
			if seen[c.Key] {
				t.Errorf("%s: key %s twice", name, c.Key)
			}
			seen[c.Key] = true
			parts := strings.Split(c.Key, "/")
			if c.Server != model.ServerQuicbench {
				if parts[len(parts)-1] != c.Server {
					t.Errorf("%s: key %s does not end in its server %s", name, c.Key, c.Server)
				}
				parts = parts[:len(parts)-1]
			}
			if len(parts) < 6 || parts[len(parts)-3] != c.Protocol || parts[len(parts)-2] != c.Client || parts[len(parts)-1] != c.CC {
				t.Errorf("%s: key %s does not end in protocol/client/cc", name, c.Key)
			}
			group := strings.Join(append(append([]string(nil), parts[:len(parts)-3]...), parts[len(parts)-2:]...), "/")
			if c.Server != model.ServerQuicbench {
				group += "/" + c.Server
			}
			if c.Group != group {
				t.Errorf("%s: group %q of %s; want %q", name, c.Group, c.Key, group)
			}
			if c.Metric == "" || c.Unit == "" || c.Iterations < 1 {
				t.Errorf("%s: %s has metric %q unit %q iterations %d", name, c.Key, c.Metric, c.Unit, c.Iterations)
			}
			if _, err := CellParams(&c); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
}

func TestBuiltinsList(t *testing.T) {
	infos := Builtins()
	if len(infos) != len(BuiltinNames()) || infos[0].Name != "quick" {
		t.Fatalf("Builtins() = %v", infos)
	}
	for _, in := range infos {
		if in.Description == "" || strings.Contains(in.Description, "\n") {
			t.Errorf("%s: description %q is not one line", in.Name, in.Description)
		}
	}
	_, err := Builtin("degraded-network")
	if err == nil || err.Error() != `no built-in plan named "degraded-network", did you mean "degraded-networks"? (built-in plans: quick, degraded-networks, page-load-grid, image-transfer, three-sites, size-bandwidth-grid, fairness, implementations, parallel-check)` {
		t.Errorf("Builtin(typo) error = %v", err)
	}
}

func cellsBy(t *testing.T, name string) map[string]model.Cell {
	t.Helper()
	p, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	cells, _ := p.Expand()
	m := map[string]model.Cell{}
	for _, c := range cells {
		m[c.Key] = c
	}
	return m
}

func TestDegradedNetworksDesign(t *testing.T) {
	cells := cellsBy(t, "degraded-networks")
	c, ok := cells["bad-network/stream/segments=20,interval=50ms,size=16KB/h3/builtin/cubic"]
	if !ok {
		t.Fatal("no stream cell in bad-network")
	}
	if c.LinkUp != "delay 50ms 15ms loss 5%" || c.LinkDown != c.LinkUp || c.Iterations != 100 || c.Metric != "interval_p95_ms" || c.HigherIsBetter {
		t.Errorf("stream cell %+v", c)
	}
	for key, iters := range map[string]int{
		"realistic/latency/requests=20,size=0B/h2/builtin/cubic":               100,
		"realistic/ttfb/size=1KB/h2/builtin/cubic":                             100,
		"loss-2/multiplex/objects=10,size=100KB/h3/builtin/cubic":              100,
		"loss-2/multiplex/objects=4,size=1MB/h3/builtin/cubic":                 100,
		"baseline/download/size=3.4MB/h2/builtin/cubic":                        30,
		"baseline/multiplex/objects=3,size=3.4MB/h2/builtin/cubic":             30,
		"baseline/upload/size=5MB/h3/builtin/cubic":                            30,
		"baseline/page/objects=20,size=25KB,connection=cold/h3/chromium/cubic": 30,
		"baseline/page/objects=20,size=25KB,connection=cold/h3/firefox/cubic":  30,
		"baseline/handshake/mode=0rtt/h3/builtin/cubic":                        30,
	} {
		if cells[key].Iterations != iters {
			t.Errorf("%s: %d iterations; want %d", key, cells[key].Iterations, iters)
		}
	}
	if _, ok := cells["baseline/handshake/mode=0rtt/h2/builtin/cubic"]; ok {
		t.Error("0-RTT over h2 should be skipped")
	}
	if c := cells["realistic/ttfb/size=1KB/h2/builtin/cubic"]; c.LinkUp != "delay 25ms 10ms loss 2%" {
		t.Errorf("realistic link %q", c.LinkUp)
	}
	if c := cells["loss-2/ttfb/size=1KB/h2/builtin/cubic"]; c.LinkUp != "loss 2%" || c.LinkDown != "loss 2%" {
		t.Errorf("loss-2 links %q %q", c.LinkUp, c.LinkDown)
	}
	if c := cells["baseline/ttfb/size=1KB/h2/builtin/cubic"]; c.LinkUp != "" || c.LinkDown != "" {
		t.Errorf("baseline links %q %q", c.LinkUp, c.LinkDown)
	}
	for key, iters := range map[string]int{
		"realistic/latency/requests=20,size=0B/h2/chromium/cubic":              100,
		"bad-network/upload/size=5MB/h3/chromium/cubic":                        30,
		"loss-2/multiplex/objects=3,size=3.4MB/h3/chromium/cubic":              30,
		"baseline/page/objects=20,size=25KB,connection=cold/h3/chromium/cubic": 30,
	} {
		if cells[key].Iterations != iters {
			t.Errorf("%s: %d iterations; want %d", key, cells[key].Iterations, iters)
		}
	}
	p, _ := Builtin("degraded-networks")
	if n := p.Notes(); len(n) != 3 || !strings.Contains(n[0], "client chromium skipped: the chromium client does not run handshake") ||
		!strings.Contains(n[1], "client firefox skipped: the firefox client does not run handshake") ||
		!strings.Contains(n[2], "protocol h2 skipped for mode 0rtt") {
		t.Errorf("notes %q", n)
	}
}

func TestPageLoadGridDesign(t *testing.T) {
	p, _ := Builtin("page-load-grid")
	sc := p.Scenarios()
	if len(sc) != 12 {
		t.Fatalf("%d scenarios; want 12", len(sc))
	}
	// first dimension (rate) slowest, zero loss left out of the spec
	want := []Scenario{
		{Name: "rate=2mbit,delay=9ms,loss=0%", Up: "delay 9ms rate 2mbit", Down: "delay 9ms rate 2mbit",
			Factors: []model.Factor{{Name: "rate", Value: "2mbit"}, {Name: "delay", Value: "9ms"}, {Name: "loss", Value: "0%"}}},
		{Name: "rate=2mbit,delay=9ms,loss=2%", Up: "delay 9ms loss 2% rate 2mbit", Down: "delay 9ms loss 2% rate 2mbit",
			Factors: []model.Factor{{Name: "rate", Value: "2mbit"}, {Name: "delay", Value: "9ms"}, {Name: "loss", Value: "2%"}}},
	}
	if !reflect.DeepEqual(sc[:2], want) {
		t.Errorf("first scenarios %+v; want %+v", sc[:2], want)
	}
	if sc[11].Name != "rate=50mbit,delay=109ms,loss=2%" {
		t.Errorf("last scenario %q", sc[11].Name)
	}
	cells, _ := p.Expand()
	c := cells[0]
	if c.Key != "rate=2mbit,delay=9ms,loss=0%/page/objects=5,size=4KB,connection=cold/h1/builtin/cubic" || c.Iterations != 100 || c.Metric != "plt_ms" {
		t.Errorf("first cell %+v", c)
	}
	wantF := []model.Factor{{Name: "rate", Value: "2mbit"}, {Name: "delay", Value: "9ms"}, {Name: "loss", Value: "0%"}, {Name: "objects", Value: "5"}, {Name: "size", Value: "4KB"}, {Name: "connection", Value: "cold"}}
	if !reflect.DeepEqual(c.Factors, wantF) {
		t.Errorf("factors %v; want %v", c.Factors, wantF)
	}
	groups := map[string]int{}
	for _, c := range cells {
		groups[c.Group]++
	}
	if len(groups) != 48 {
		t.Errorf("%d groups; want 48 configurations", len(groups))
	}
	for g, n := range groups {
		if n != 3 {
			t.Errorf("group %s has %d protocols", g, n)
		}
	}
}

func TestImageTransferDesign(t *testing.T) {
	cells := cellsBy(t, "image-transfer")
	for _, size := range []string{"12KB", "352KB", "1.1MB", "3MB"} {
		for _, proto := range []string{"h1c", "quic"} {
			c, ok := cells["latency-100ms/download/size="+size+"/"+proto+"/builtin/cubic"]
			if !ok || c.LinkUp != "delay 50ms" || c.LinkDown != "delay 50ms" || c.Iterations != 5 || c.Metric != "goodput_mbps" || !c.HigherIsBetter {
				t.Errorf("%s %s: %+v", size, proto, c)
			}
		}
	}
	if c := cells["latency-20ms/download/size=3MB/quic/builtin/cubic"]; c.LinkUp != "delay 10ms" {
		t.Errorf("20 ms case link %q", c.LinkUp)
	}
	if c := cells["loss-5/download/size=3MB/quic/builtin/cubic"]; c.LinkDown != "loss 5%" {
		t.Errorf("loss-5 link %q", c.LinkDown)
	}
}

func TestThreeSitesDesign(t *testing.T) {
	cells := cellsBy(t, "three-sites")
	for _, site := range GeneratedSites {
		for _, proto := range []string{"h1", "h2", "h3"} {
			c, ok := cells["lighthouse-desktop/site/site="+site+",connection=cold/"+proto+"/chromium/cubic"]
			if !ok || c.Client != "chromium" || c.LinkDown != "rate 10.24mbit" || c.LinkUp != "rate 10.24mbit" || c.Iterations != 30 {
				t.Errorf("%s %s: %+v", site, proto, c)
			}
			c, ok = cells["lighthouse-desktop/site/site="+site+",connection=cold/"+proto+"/lighthouse/cubic"]
			if !ok || c.LinkDown != "rate 10.24mbit" || c.LinkUp != "rate 10.24mbit" || c.Iterations != 10 || c.Metric != "lh_score" || !c.HigherIsBetter {
				t.Errorf("lighthouse %s %s: %+v", site, proto, c)
			}
		}
	}
}

func TestSizeBandwidthGridDesign(t *testing.T) {
	cells := cellsBy(t, "size-bandwidth-grid")
	c, ok := cells["delay100:rate=1000mbit,loss=10%/download/size=50MB/h3/builtin/cubic"]
	if !ok || c.LinkUp != "" || c.LinkDown != "delay 100ms loss 10% rate 1gbit" || c.Warmup || c.Iterations != 10 {
		t.Errorf("grid corner %+v", c)
	}
	c, ok = cells["jitter:rate=10mbit,delay=112ms,jitter=10ms/download/size=5KB/h2/builtin/cubic"]
	if !ok || c.LinkUp != "" || c.LinkDown != "delay 112ms 10ms loss 5% rate 10mbit" {
		t.Errorf("jitter point %+v", c)
	}
	c, ok = cells["gigabit/cpu/size=700MB/h3/builtin/cubic"]
	if !ok || c.LinkUp != "rate 1gbit" || c.Metric != "cpu_s_per_mb" || c.Unit != "s/MB" || !c.Warmup {
		t.Errorf("cpu cell %+v", c)
	}
	for k := range cells {
		if strings.HasPrefix(k, "gigabit/download") || strings.Contains(k, "/cpu/") && !strings.HasPrefix(k, "gigabit/") {
			t.Errorf("cell %s is outside its test's scenarios", k)
		}
	}
	p, _ := Builtin("size-bandwidth-grid")
	if got := p.TimeoutFor(&c); got.Minutes() != 5 {
		t.Errorf("cpu timeout %v", got)
	}
}
