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
		{"chromium", estCell(TestPage, model.ProtoH3, "chromium", "rate 2mbit", "rate 2mbit"), "chromium"},
		{"lighthouse", estCell(TestSite, model.ProtoH2, "lighthouse", "rate 2mbit", "rate 2mbit"), "lighthouse"},
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
		atCap, _ := EstimateSample(&bare, 0)
		k := endpointCPUTCP
		if tc.cell.Protocol == model.ProtoH3 {
			k = endpointCPUQUIC
		}
		cpu := k.fixed + time.Duration(work.requests)*k.perRequest + time.Duration(float64(k.perMB)*float64(work.bytes)/1e6) + time.Duration(float64(k.perSecond)*onLink.Seconds())
		want := max(EndpointLoadFactor*float64(cpu), RefCores*float64(atCap-estRunnerOverhead)) / float64(onLink)
		if l.Exclusive || l.Reason != "" || math.Abs(l.CPU-want) > 1e-9 || l.CPU > tc.most || l.CPU < 0.005 {
			t.Errorf("%s: %+v, want CPU %.4f (at most %.2f), not exclusive", tc.name, l, want, tc.most)
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
	if MaxParallel(RefCores) != 16 || MaxParallel(0) != MaxParallelPerCPU {
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
