package plan

import (
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
		excl   bool
		reason string
	}{
		{"cpu test", estCell(TestCPU, model.ProtoH2, model.ClientBuiltin, "rate 2mbit", "rate 2mbit", "size", "10MB"), true, "cpu test"},
		{"chromium", estCell(TestPage, model.ProtoH3, model.ClientChromium, "rate 2mbit", "rate 2mbit"), true, "chromium"},
		{"lighthouse", estCell(TestSite, model.ProtoH2, model.ClientLighthouse, "rate 2mbit", "rate 2mbit"), true, "lighthouse"},
		{"unlimited link", estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "", "", "size", "1MB"), true, "Gbit/s"},
		{"unlimited up only", estCell(TestDownload, model.ProtoH2, model.ClientBuiltin, "", "rate 2mbit", "size", "1MB"), true, "Gbit/s"},
		{"1gbit h3", estCell(TestDownload, model.ProtoH3, model.ClientBuiltin, "rate 1gbit", "rate 1gbit", "size", "1MB"), true, "965 Mbit/s"},
	} {
		l, err := CellLoad(&tc.cell)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if l.Exclusive != tc.excl || !strings.Contains(l.Reason, tc.reason) || l.CPU <= LoadBudget(RefCores) {
			t.Errorf("%s: load %+v; want exclusive, reason with %q, CPU over the budget", tc.name, l, tc.reason)
		}
	}

	// A 2 Mbit/s page over HTTP/3: 1.93 Mbit/s of payload at 1 Gbit/s per
	// 2 CPUs, plus the fixed part.
	c := estCell(TestPage, model.ProtoH3, model.ClientBuiltin, "rate 2mbit delay 9ms", "rate 2mbit delay 9ms")
	l, err := CellLoad(&c)
	if err != nil {
		t.Fatal(err)
	}
	want := loadBase + RefCores*2e6*estWireEfficiency/estCapQUIC
	if l.Exclusive || l.Reason != "" || l.CPU < want-1e-12 || l.CPU > want+1e-12 || l.CPU > 0.03 {
		t.Errorf("2mbit h3 page: %+v, want CPU %.4f, not exclusive", l, want)
	}
	// The same link over HTTP/2 costs less: TCP's cost per byte is lower.
	c.Protocol = model.ProtoH2
	if l2, _ := CellLoad(&c); l2.CPU >= l.CPU || l2.CPU < loadBase {
		t.Errorf("2mbit h2 page: %+v, h3 %+v", l2, l)
	}
	// A 500 Mbit/s HTTP/2 transfer stays under the budget, so does 400
	// Mbit/s over HTTP/3 (0.79 CPU); 600 Mbit/s over HTTP/3 does not.
	for _, tc := range []struct {
		proto, link string
		excl        bool
	}{{model.ProtoH2, "rate 500mbit", false}, {model.ProtoH3, "rate 400mbit", false}, {model.ProtoH3, "rate 600mbit", true}} {
		c := estCell(TestDownload, tc.proto, model.ClientBuiltin, tc.link, tc.link, "size", "1MB")
		if l, _ := CellLoad(&c); l.Exclusive != tc.excl {
			t.Errorf("%s over %q: %+v, want exclusive %t", tc.proto, tc.link, l, tc.excl)
		}
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
