package plan

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

func TestCellLoad(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cell   model.Cell
		reason string
	}{
		{"cpu test", estCell(TestCPU, model.ProtoH2, model.ClientBuiltin, "rate 2mbit", "rate 2mbit", "size", "10MB"), "cpu test"},
		{"lighthouse", estCell(TestSite, model.ProtoH2, "lighthouse", "rate 2mbit", "rate 2mbit"), "lighthouse"},
		{"aioquic", estCell(TestDownload, model.ProtoH3, "aioquic", "rate 2mbit", "rate 2mbit", "size", "1MB"), "aioquic"},
		{"fairness", estCell(TestFairness, model.ProtoH2, model.ClientBuiltin, "rate 10mbit delay 10ms", "rate 10mbit delay 10ms"), "fairness"},
		{"chromium over an unlimited link", estCell(TestPage, model.ProtoH3, "chromium", "loss 2%", "loss 2%"), "no rate limit"},
		{"firefox over an unlimited link", estCell(TestPage, model.ProtoH2, "firefox", "", ""), "no rate limit"},
		{"firefox ttfb", estCell(TestTTFB, model.ProtoH2, "firefox", "rate 2mbit delay 25ms", "rate 2mbit delay 25ms"), "short exchanges (ttfb)"},
		{"chromium latency", estCell(TestLatency, model.ProtoH3, "chromium", "rate 10mbit delay 50ms", "rate 10mbit delay 50ms"), "short exchanges (latency)"},
		{"chromium handshake", estCell(TestHandshake, model.ProtoH3, "chromium", "rate 10mbit delay 50ms", "rate 10mbit delay 50ms"), "short exchanges (handshake)"},
		{"unlimited link", estCell(TestTTFB, model.ProtoH2, model.ClientBuiltin, "", ""), "no rate limit"},
		{"loss without delay", estCell(TestDownload, model.ProtoH3, model.ClientBuiltin, "loss 2%", "loss 2%", "size", "1MB"), "no rate limit"},
		{"50 MB at 1 Gbit/s", estCell(TestDownload, model.ProtoH3, model.ClientBuiltin, "rate 1gbit delay 1ms", "rate 1gbit delay 1ms", "size", "50MB"), "predicted to keep"},
	} {
		l, err := CellLoad(&tc.cell)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !l.Exclusive || !strings.Contains(l.Reason, tc.reason) {
			t.Errorf("%s: load %+v; want exclusive, reason with %q", tc.name, l, tc.reason)
		}
	}

	// Link-bound cells: the share of the sample's time on the link that it
	// would take at the machine's cap, times the reference machine's CPUs.
	for _, tc := range []struct {
		name string
		cell model.Cell
		most float64
	}{
		{"2mbit h3 page", estCell(TestPage, model.ProtoH3, model.ClientBuiltin, "rate 2mbit delay 9ms", "rate 2mbit delay 9ms"), 0.15},
		{"10mbit h2 page", estCell(TestPage, model.ProtoH2, model.ClientBuiltin, "rate 10mbit delay 9ms", "rate 10mbit delay 9ms"), 0.2},
		{"download, rate on the down direction only", estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "", "rate 2mbit delay 50ms", "size", "1MB"), 0.05},
		{"loss-limited download, 100 ms", estCell(TestDownload, model.ProtoH3, model.ClientBuiltin, "delay 100ms loss 10%", "delay 100ms loss 10%", "size", "10MB"), 0.05},
		{"latency over 25 ms", estCell(TestLatency, model.ProtoH3, model.ClientBuiltin, "delay 25ms", "delay 25ms"), 0.1},
	} {
		l, err := CellLoad(&tc.cell)
		if err != nil {
			t.Fatal(err)
		}
		prm, _ := StoredCellParams(&tc.cell)
		onLink, work, _ := estimateParams(&tc.cell, prm, 0)
		bare := tc.cell
		bare.LinkUp, bare.LinkDown = "", ""
		k, capBps := endpointCPUTCP, estCapTCP
		if tc.cell.Protocol == model.ProtoH3 {
			k, capBps = endpointCPUQUIC, estCapQUIC
		}
		cpu := k.fixed + time.Duration(work.requests)*k.perRequest + time.Duration(float64(k.perMB)*float64(work.bytes)/1e6) + time.Duration(float64(k.perSecond)*onLink.Seconds())
		atCap := time.Duration(float64(work.bytes) * 8 / capBps * 1e9)
		want := max(EndpointLoadFactor*float64(cpu), RefCores*float64(atCap)) / float64(onLink)
		if l.Exclusive || l.Reason != "" || l.Browser || math.Abs(l.CPU-want) > 1e-9 || l.CPU > tc.most || l.CPU < 0.005 {
			t.Errorf("%s: %+v, want CPU %.4f (at most %.2f), not exclusive", tc.name, l, want, tc.most)
		}
	}
	// The stream test waits between its segments: that time is no CPU's.
	stream := estCell(TestStream, model.ProtoH3, model.ClientBuiltin, "delay 25ms 10ms loss 2%", "delay 25ms 10ms loss 2%")
	if l, _ := CellLoad(&stream); l.Exclusive || l.CPU > 0.1 {
		t.Errorf("stream test over 50 ms: %+v, want a few per cent of a CPU", l)
	}

	// Browser cells: their browser's cost around the sample, each page and
	// the network work, over the sample's time; link-bound long ones share
	// the machine (long: whatever the browser's per-sample figures, which
	// change with its life cycle), short ones may fill the budget.
	for _, tc := range []struct {
		name string
		cell model.Cell
		long bool
	}{
		{"chromium page, 2 Mbit/s", estCell(TestPage, model.ProtoH3, "chromium", "rate 2mbit delay 25ms", "rate 2mbit delay 25ms"), false},
		{"chromium 4 MB download, 2 Mbit/s", estCell(TestDownload, model.ProtoH2, "chromium", "rate 2mbit delay 25ms", "rate 2mbit delay 25ms", "size", "4MB"), true},
		{"firefox 3.4 MB multiplex, 100 ms and 5% loss", estCell(TestMultiplex, model.ProtoH2, "firefox", "delay 50ms 15ms loss 5%", "delay 50ms 15ms loss 5%", "objects", "3", "size", "3.4MB"), true},
		{"firefox page over 50 ms", estCell(TestPage, model.ProtoH2, "firefox", "delay 25ms", "delay 25ms"), false},
	} {
		l, err := CellLoad(&tc.cell)
		if err != nil {
			t.Fatal(err)
		}
		bc, _ := browserCostOf(tc.cell.Client)
		prm, _ := StoredCellParams(&tc.cell)
		onLink, work, _ := estimateParams(&tc.cell, prm, 0)
		b, k := bc.tcp, endpointCPUTCP
		if tc.cell.Protocol == model.ProtoH3 {
			b, k = bc.quic, endpointCPUQUIC
		}
		net := func(k endpointCPU) float64 {
			return float64(k.fixed + time.Duration(work.requests)*k.perRequest +
				time.Duration(float64(k.perMB)*float64(work.bytes)/1e6) + time.Duration(float64(k.perSecond)*onLink.Seconds()))
		}
		browser := float64(bc.sampleCPU+time.Duration(work.pages)*bc.pageCPU) + net(b)
		server := net(k) / 2 // the server's half of the built-in client's
		want := min(RefCores, (browser+(2*EndpointLoadFactor-1)*server)/float64(onLink))
		if !l.Browser || work.pages != 1 || math.Abs(l.CPU-want) > 1e-6 || l.Exclusive != (want > LoadBudget(RefCores)) || (tc.long && l.Exclusive) {
			t.Errorf("%s: %+v (%d pages), want CPU %.4f, exclusive when over the budget", tc.name, l, work.pages, want)
		}
	}
	// The faster the link, the larger the share: 10 MB over 2 and 20
	// Mbit/s over HTTP/2; over 100 Mbit/s HTTP/3 fills the budget.
	slow := estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "rate 2mbit delay 1ms", "rate 2mbit delay 1ms", "size", "10MB")
	fast := estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "rate 20mbit delay 1ms", "rate 20mbit delay 1ms", "size", "10MB")
	ls, _ := CellLoad(&slow)
	if lf, _ := CellLoad(&fast); lf.CPU <= 3*ls.CPU || lf.Exclusive {
		t.Errorf("10 MB over 20 Mbit/s %+v; over 2 Mbit/s %+v: want several times the CPU, not exclusive", lf, ls)
	}
	h3 := estCell(TestDownload, model.ProtoH3, model.ClientBuiltin, "rate 100mbit delay 1ms", "rate 100mbit delay 1ms", "size", "10MB")
	if l, _ := CellLoad(&h3); !l.Exclusive {
		t.Errorf("10 MB over 100 Mbit/s, HTTP/3: %+v, want exclusive (quic-go's CPU per megabyte)", l)
	}

	for _, c := range []model.Cell{
		estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "rate banana", "", "size", "1MB"),
		estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "", "delay -5ms", "size", "1MB"),
		estCell(TestDownload, "h4", model.ClientBuiltin, "", "", "size", "1MB"),
	} {
		if l, err := CellLoad(&c); err == nil || !strings.Contains(err.Error(), c.Key) {
			t.Errorf("up %q down %q protocol %s: load %+v, error %v; want an error naming the cell", c.LinkUp, c.LinkDown, c.Protocol, l, err)
		}
	}
}

func TestLoadBudgetAndMaxParallel(t *testing.T) {
	if LoadBudget(RefCores) != 1 || LoadBudget(8) != 4 || LoadBudget(0) != 0.5 {
		t.Errorf("LoadBudget: %v %v %v", LoadBudget(RefCores), LoadBudget(8), LoadBudget(0))
	}
	if MaxParallel(RefCores) != 64 || MaxParallel(0) != MaxParallelPerCPU {
		t.Errorf("MaxParallel: %d %d", MaxParallel(RefCores), MaxParallel(0))
	}
}

func TestAdmissionAdmit(t *testing.T) {
	a := Admission{Slots: 3, Budget: 1}
	small := SampleLoad{CPU: 0.3}
	big := SampleLoad{CPU: 5}
	excl := SampleLoad{CPU: 2, Exclusive: true, Reason: "r"}
	for _, tc := range []struct {
		name    string
		running []SampleLoad
		next    SampleLoad
		want    bool
	}{
		{"idle machine, small", nil, small, true},
		{"idle machine, exclusive", nil, excl, true},
		{"idle machine, over the budget", nil, big, true},
		{"within the budget", []SampleLoad{small, small}, small, true},
		{"at the budget", []SampleLoad{{CPU: 0.5}}, SampleLoad{CPU: 0.5}, true},
		{"over the budget", []SampleLoad{small, small, small}[:2], SampleLoad{CPU: 0.41}, false},
		{"slot cap", []SampleLoad{{CPU: 0.01}, {CPU: 0.01}, {CPU: 0.01}}, SampleLoad{CPU: 0.01}, false},
		{"exclusive next beside one", []SampleLoad{{CPU: 0.01}}, excl, false},
		{"beside a running exclusive", []SampleLoad{excl}, SampleLoad{CPU: 0.01}, false},
		{"exclusive beside exclusive", []SampleLoad{excl}, excl, false},
	} {
		if got := a.Admit(tc.running, tc.next); got != tc.want {
			t.Errorf("%s: Admit(%v, %v) = %t, want %t", tc.name, tc.running, tc.next, got, tc.want)
		}
	}
	// Browsers: at most that many blocks in a browser at once, any number
	// of others beside them; 0 is no limit.
	br := SampleLoad{CPU: 0.01, Browser: true}
	two := Admission{Slots: 8, Budget: 1, Browsers: 2}
	if !two.Admit([]SampleLoad{br}, br) || two.Admit([]SampleLoad{br, br}, br) || !two.Admit([]SampleLoad{br, br}, small) {
		t.Error("Browsers 2: want a second browser block admitted, a third refused, another block admitted")
	}
	if !two.Admit(nil, br) || !(Admission{Slots: 8, Budget: 1}).Admit([]SampleLoad{br, br, br}, br) {
		t.Error("an idle machine, or no browser limit: want the browser block admitted")
	}
	// One slot: nothing beside a running block, whatever its load.
	if (Admission{Slots: 1, Budget: 1}).Admit([]SampleLoad{{CPU: 0.01}}, SampleLoad{CPU: 0.01}) {
		t.Error("one slot admitted a second block")
	}
}

func TestParallelOrder(t *testing.T) {
	s := time.Second
	blocks := []Block{
		{Duration: 1 * s},                  // 0
		{Duration: 5 * s},                  // 1
		{Exclusive: true, Duration: 1 * s}, // 2
		{Duration: 3 * s},                  // 3
		{Duration: 5 * s},                  // 4: ties with 1, after it
		{Exclusive: true, Duration: 9 * s}, // 5: exclusive keep schedule order
		{Duration: 0},                      // 6: unknown, last
		{Duration: 3 * s},                  // 7
	}
	want := []int{2, 5, 1, 4, 3, 7, 0, 6}
	if got := ParallelOrder(blocks); !slices.Equal(got, want) {
		t.Errorf("ParallelOrder = %v, want %v", got, want)
	}
	if got := ParallelOrder(nil); len(got) != 0 {
		t.Errorf("ParallelOrder(nil) = %v", got)
	}
}

func TestMemoryLimits(t *testing.T) {
	builtin := []model.Cell{{Client: model.ClientBuiltin}}
	browsers := []model.Cell{{Client: model.ClientBuiltin}, {Client: "chromium"}, {Client: "firefox"}, {Client: "chromium"}}
	const gb = 1 << 30
	// 22 GB available: 16.5 GB for testbeds; 64 of them take 4 GB, and
	// testbeds holding both browsers (0.9 GB) fit 13 times in the rest.
	if n, b := MemoryLimits(22*gb, 64, builtin); n != 64 || b != 0 {
		t.Errorf("built-in client only: %d testbeds, %d browsers; want 64 and no limit", n, b)
	}
	n, b := MemoryLimits(22*gb, 64, browsers)
	left := MemShare*22*gb - 64*MemPerTestbed
	chromium, _ := browserCostOf("chromium")
	firefox, _ := browserCostOf("firefox")
	want := int(left / float64(chromium.memory+firefox.memory))
	if n != 64 || b != want || b < 10 || b > 20 {
		t.Errorf("both browsers: %d testbeds, %d browsers; want 64 and %d", n, b, want)
	}
	// Lighthouse holds a Chromium.
	if _, b := MemoryLimits(22*gb, 64, []model.Cell{{Client: "lighthouse"}}); b != int(left/float64(chromium.memory)) {
		t.Errorf("lighthouse: %d browsers", b)
	}
	// 2 GB: the memory caps the testbeds, and a browser still runs.
	if n, b := MemoryLimits(2*gb, 64, browsers); n != int(MemShare*2/(float64(MemPerTestbed)/gb)) || b != 1 {
		t.Errorf("2 GB: %d testbeds, %d browsers", n, b)
	}
	// Nothing available, or less than asked: one testbed, what was asked.
	if n, b := MemoryLimits(0, 64, browsers); n != 1 || b != 1 {
		t.Errorf("no memory: %d testbeds, %d browsers; want 1 and 1", n, b)
	}
	if n, _ := MemoryLimits(22*gb, 3, builtin); n != 3 {
		t.Errorf("3 asked: %d testbeds", n)
	}
}

func TestFileLimit(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{{1024, 28}, {20000, 621}, {100, 1}, {0, 1}, {1 << 62, math.MaxInt32}} {
		if got := FileLimit(tc.nofile); got != tc.want {
			t.Errorf("FileLimit(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
	}
}

func TestMeasuredLoad(t *testing.T) {
	s := time.Second
	// The built-in client: both endpoints' CPU times EndpointLoadFactor.
	if got := MeasuredLoad(model.ClientBuiltin, s/10, s/10, 2*s); math.Abs(got-EndpointLoadFactor*0.1) > 1e-9 {
		t.Errorf("built-in: %v, want %v", got, EndpointLoadFactor*0.1)
	}
	// A browser: its own CPU once, the server's network work and the
	// emulator's share of as much again.
	if got := MeasuredLoad("firefox", s, s/10, 2*s); math.Abs(got-(1+0.2)/2) > 1e-9 {
		t.Errorf("firefox: %v, want %v", got, 0.6)
	}
	if got := MeasuredLoad("chromium", s, 0, 4*s); got != 0.25 {
		t.Errorf("chromium: %v, want 0.25", got)
	}
	if got := MeasuredLoad(model.ClientBuiltin, s, s, 0); got != 0 {
		t.Errorf("no time held: %v", got)
	}
}

// TestBrowserCostsFromTheRegistry: the browser clients' costs are their
// stack descriptors' (client.cost), an audit client's those of the
// browser it uses with its own overhead and work, and a client that loads
// no pages in a browser has none.
func TestBrowserCostsFromTheRegistry(t *testing.T) {
	for _, name := range []string{"chromium", "firefox"} {
		bc, ok := browserCostOf(name)
		if !ok || bc.stack != name || bc.overhead <= 0 || bc.sampleCPU <= 0 || bc.pageCPU <= 0 ||
			bc.tcp.perSecond <= 0 || bc.quic.perRequest <= 0 || bc.memory < 100<<20 {
			t.Errorf("%s: %+v, %v; want every cost set from its stack.yaml", name, bc, ok)
		}
	}
	chromium, _ := browserCostOf("chromium")
	lh, ok := browserCostOf("lighthouse")
	if !ok || lh.stack != "chromium" || lh.memory != chromium.memory || lh.sampleCPU != chromium.sampleCPU {
		t.Errorf("lighthouse: %+v, %v; want Chromium's costs", lh, ok)
	}
	for _, name := range []string{model.ClientBuiltin, "aioquic", "no-such-client"} {
		if bc, ok := browserCostOf(name); ok {
			t.Errorf("%s: %+v; want no browser cost", name, bc)
		}
	}
}
