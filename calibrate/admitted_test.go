package calibrate

import (
	"context"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/plan"
)

// TestAdmittedLoads: the loaded testbeds take turns between QUIC and TLS
// and stop where the admission rule stops admitting them beside the probe
// testbed.
func TestAdmittedLoads(t *testing.T) {
	l := mustParse(t, "delay 50ms rate 1mbit")
	cfg := Config{Up: l, Down: l}
	loads, admitted, err := admittedLoads(cfg, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(loads) != 63 || admitted < 1 || admitted > 63 {
		t.Fatalf("%d loads, %d admitted", len(loads), admitted)
	}
	var sum float64
	for i, ld := range loads[:admitted] {
		if ld.Exclusive || ld.CPU <= 0 {
			t.Errorf("load %d: %+v", i, ld)
		}
		sum += ld.CPU
	}
	if sum > plan.LoadBudget(2) || (admitted < 63 && sum+loads[admitted].CPU <= plan.LoadBudget(2)) {
		t.Errorf("%d admitted, %.3f CPUs: want the most that fit the budget of %v", admitted, sum, plan.LoadBudget(2))
	}
	if loads[0].CPU <= loads[1].CPU {
		t.Errorf("QUIC's transfer (%v) should cost more than TLS's (%v)", loads[0].CPU, loads[1].CPU)
	}
	// One testbed: nothing to load.
	if loads, admitted, err := admittedLoads(cfg, 1, 2); err != nil || len(loads) != 0 || admitted != 0 {
		t.Errorf("1 testbed: %v, %d, %v", loads, admitted, err)
	}
	// A 1 Gbit/s link's transfers fill the budget: none admitted beside.
	fast := mustParse(t, "delay 1ms rate 1gbit")
	if _, admitted, err := admittedLoads(Config{Up: fast, Down: fast}, 4, 2); err != nil || admitted != 0 {
		t.Errorf("1 Gbit/s: %d admitted, %v", admitted, err)
	}
}

// TestRunAdmittedStructure runs one probe testbed beside two loaded ones
// and checks the report's structure (not its precision, a benchmark's
// figure), and that everything is gone afterwards.
func TestRunAdmittedStructure(t *testing.T) {
	requireRoot(t)
	l := mustParse(t, "delay 5ms rate 5mbit")
	rep, err := RunAdmitted(context.Background(), Config{Up: l, Down: l, Seed: 3, Packets: 300}, []int{1, 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Admitted) != 2 || len(rep.Figures) != 4 {
		t.Fatalf("report: %d results, %d figures", len(rep.Admitted), len(rep.Figures))
	}
	one, three := rep.Admitted[0], rep.Admitted[1]
	if one.Testbeds != 1 || one.Loaded != 0 || one.MeasuredCPU != 0 || one.Phase.Pooled.Probes == 0 {
		t.Errorf("1 testbed: %+v", one)
	}
	// A transfer may fail on a machine busy with other tests (the report
	// counts and names it); the structure needs one that measured.
	if three.Testbeds != 3 || three.Loaded != 2 || three.QUIC != 1 || three.TLS != 1 || three.Errors >= three.Loaded {
		t.Errorf("3 testbeds: %+v (warnings %q)", three, rep.Warnings)
	} else if three.Errors > 0 {
		t.Logf("3 testbeds: %d of %d transfers failed: %q", three.Errors, three.Loaded, rep.Warnings)
	}
	if three.PredictedCPU <= 0 || three.MeasuredCPU <= 0 || three.GoodputMbps <= 0 || three.GoodputMbps > 5 {
		t.Errorf("3 testbeds: load predicted %v, measured %v, goodput %v Mbit/s", three.PredictedCPU, three.MeasuredCPU, three.GoodputMbps)
	}
	if three.Phase.Pooled.Probes == 0 || three.Phase.Seconds <= 0 || three.FDsPerTestbed <= 0 || three.ThreadsPerTestbed <= 0 || three.BulkServerMB <= 0 {
		t.Errorf("3 testbeds: phase %+v, fds %v, threads %v, bulk server %v MB", three.Phase, three.FDsPerTestbed, three.ThreadsPerTestbed, three.BulkServerMB)
	}
	for _, f := range rep.Figures {
		if !strings.HasPrefix(f.Name, "admitted, ") || (f.Status != StatusOK && f.Status != StatusFail) {
			t.Errorf("figure %q: %s", f.Name, f.Status)
		}
	}
	// the probe testbed's share of late packets: a share, of the one
	// testbed that probed
	if tbs := three.Phase.Testbeds; len(tbs) != 1 || !(tbs[0].LateOutPercent >= 0 && tbs[0].LateOutPercent <= 100) {
		t.Errorf("3 testbeds: probe testbeds %+v, want one with a late share in 0..100%%", tbs)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil || !strings.Contains(b.String(), "parallel testbeds at the admitted load") || !strings.Contains(b.String(), "late: the probe testbed's packets") {
		t.Errorf("table: %v\n%s", err, b.String())
	}
	if held := heldNamespaces(t); len(held) > 0 {
		t.Errorf("left behind: %v", held)
	}
	// An unlimited link has no admitted load to carry.
	none := mustParse(t, "loss 1%")
	if _, err := RunAdmitted(context.Background(), Config{Up: none, Down: none}, []int{2}); err == nil {
		t.Error("an unlimited link: want an error")
	}
}
