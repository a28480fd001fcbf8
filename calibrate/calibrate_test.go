package calibrate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/testsupport"
)

// These tests build real testbeds and veth pairs (root; CI is root). They
// assert structure and physics, never timing precision: precision and
// speed are benchmarks (bench_test.go).

func requireRoot(t testing.TB) {
	t.Helper()
	testsupport.RequireRoot(t, "needs root (network namespaces)")
	if testing.Short() {
		t.Skip("namespace test skipped in -short mode")
	}
}

func mustParse(t testing.TB, s string) spec.Link {
	t.Helper()
	l, err := spec.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// figure returns the figure named name in direction dir.
func figure(t *testing.T, r *Report, dir, name string) Figure {
	t.Helper()
	for _, f := range r.Figures {
		if f.Direction == dir && f.Name == name {
			return f
		}
	}
	var names []string
	for _, f := range r.Figures {
		names = append(names, f.Direction+" "+f.Name)
	}
	t.Fatalf("no figure %q %q among %q", dir, name, names)
	return Figure{}
}

func TestRunDelayAndLoss(t *testing.T) {
	requireRoot(t)
	l := mustParse(t, "delay 5ms loss 10%")
	rep, err := Run(context.Background(), Config{Up: l, Down: l, Seed: 7, Packets: 3000})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Up != "delay 5ms loss 10%" || rep.Down != rep.Up || rep.Seed != 7 || rep.Packets != 3000 {
		t.Fatalf("report header: %+v", rep)
	}
	for _, q := range []string{"p50", "p99", "max"} {
		if f := figure(t, rep, "", "floor: one-way delay over veth "+q); f.Measured <= 0 || f.Status != StatusInfo {
			t.Errorf("floor %s: %+v", q, f)
		}
	}
	for _, dir := range []string{"up", "down"} {
		for _, label := range []string{"idle", "under 100 Mbit/s load"} {
			p50 := figure(t, rep, dir, "delay p50 "+label)
			p99 := figure(t, rep, dir, "delay p99 "+label)
			max := figure(t, rep, dir, "delay max "+label)
			// The model's delay is exactly the configured one; nothing
			// arrives before it.
			if *p50.Configured != 5 || p50.Measured < 5 || p99.Measured < p50.Measured || max.Measured < p99.Measured {
				t.Errorf("%s %s: p50 %+v p99 %+v max %+v", dir, label, p50, p99, max)
			}
			if p50.Status == StatusInfo || max.Status != StatusInfo {
				t.Errorf("%s %s: p50 must be judged, max shown only", dir, label)
			}
			figure(t, rep, dir, "jitter (mean IPDV) "+label)
		}
		loss := figure(t, rep, dir, "loss")
		if *loss.Configured != 10 || *loss.Low > 10 || *loss.High < 10 || loss.Measured < *loss.Low || loss.Measured > *loss.High {
			t.Errorf("%s loss: %+v [%v, %v]", dir, loss, *loss.Low, *loss.High)
		}
		// Same seed, same decisions: the real link lost exactly the
		// probes the seeded model lost.
		if m := figure(t, rep, dir, "lost probes vs seeded model"); m.Measured != *m.Configured || m.Status != StatusOK || m.Measured < 150 {
			t.Errorf("%s: lost probes %v, seeded model %v", dir, m.Measured, *m.Configured)
		}
		if f := figure(t, rep, dir, "reorder (late probes)"); *f.Configured != 0 || f.Measured != 0 {
			t.Errorf("%s: a link without jitter reordered: %+v", dir, f)
		}
	}
	for _, phase := range []string{"idle", "loaded"} {
		mean := figure(t, rep, "", "machine timer wake-up lateness mean "+phase)
		worst := figure(t, rep, "", "machine timer wake-up lateness max "+phase)
		if mean.Status != StatusInfo || mean.Measured < 0 || worst.Measured < mean.Measured {
			t.Errorf("machine timer %s: mean %+v max %+v", phase, mean, worst)
		}
		if f := figure(t, rep, "", "CPU time stolen by the hypervisor "+phase); f.Measured < 0 {
			t.Errorf("steal %s: %+v", phase, f)
		}
	}
	for _, f := range rep.Figures {
		if f.Name == "delivered rate" {
			t.Errorf("a link without rate has a delivered rate figure: %+v", f)
		}
	}
	if rep.OK != (len(rep.Failed()) == 0) {
		t.Errorf("OK = %v with %d failed figures", rep.OK, len(rep.Failed()))
	}
	if len(rep.Goodput) != 0 || len(rep.CPU) != 0 {
		t.Error("throughput measured without Config.Throughput")
	}
}

func TestRunRate(t *testing.T) {
	requireRoot(t)
	l := mustParse(t, "rate 20mbit")
	rep, err := Run(context.Background(), Config{Up: l, Down: l, Seed: 1, Packets: 500, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"up", "down"} {
		f := figure(t, rep, dir, "delivered rate")
		// The link cannot deliver more than its rate; it must deliver.
		if *f.Configured != 20 || f.Measured <= 0 || f.Measured > 20*1.02 || f.Status == StatusInfo {
			t.Errorf("%s: %+v", dir, f)
		}
		// A 92-byte probe takes 36.8 us to cross a 20 Mbit/s link.
		if p50 := figure(t, rep, dir, "delay p50 idle"); *p50.Configured != 0.0368 || p50.Measured < 0.0368 {
			t.Errorf("%s: idle p50 %+v", dir, p50)
		}
		figure(t, rep, dir, "delay p50 under 10 Mbit/s load")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Packets: 5}, "5 probes"},
		{Config{Duration: time.Millisecond}, "duration 1ms"},
		{Config{Up: spec.Link{Delay: -time.Millisecond}}, "up link"},
	} {
		_, err := Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v) = %v, want an error about %q", c.cfg, err, c.want)
		}
	}
}

func TestRunCancelled(t *testing.T) {
	requireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Config{Packets: 100})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run with a cancelled context: %v", err)
	}
}

// TestMachineFiguresBlameTheMachine: a delay figure that failed while the
// machine's baseline thread too woke more than 150 us late gets a note and
// a warning; passing figures, other figures and quiet phases get none.
func TestMachineFiguresBlameTheMachine(t *testing.T) {
	newRep := func() *run {
		return &run{rep: &Report{Figures: []Figure{
			{Direction: "up", Name: "earlier phase delay p99 idle", Status: StatusFail},
			{Direction: "up", Name: "delay p99 idle", Status: StatusFail},
			{Direction: "down", Name: "delay p99 idle", Status: StatusOK},
			{Direction: "up", Name: "loss", Status: StatusFail},
		}}}
	}
	late := forward.TimerStats{Wakeups: 100, LateSumNs: 400_000, LateMaxNs: 1_200_000, Over50us: 3, Over150us: 2, Over500us: 1, LateOver150SumNs: 1_200_000}
	r := newRep()
	r.machineFigures("idle", late, 200*time.Millisecond, 20*time.Millisecond, 1)
	if n := r.rep.Figures[1].Note; !strings.Contains(n, "up to 1200 us") || !strings.Contains(n, "for 0.60% of the phase") {
		t.Errorf("failed delay figure's note = %q", n)
	}
	for _, i := range []int{0, 2, 3} {
		if r.rep.Figures[i].Note != "" {
			t.Errorf("figure %d got a note: %q", i, r.rep.Figures[i].Note)
		}
	}
	if len(r.rep.Warnings) != 1 || !strings.Contains(r.rep.Warnings[0], "up delay p99 idle outside tolerance") ||
		!strings.Contains(r.rep.Warnings[0], "woke 2 times more than 150 us late") || !strings.Contains(r.rep.Warnings[0], "20ms of CPU time stolen") {
		t.Errorf("warnings = %q", r.rep.Warnings)
	}
	if got := len(r.rep.Figures); got != 8 {
		t.Errorf("%d figures, want 4 + mean, max, held-back share and steal", got)
	}
	if f := r.rep.Figures[6]; f.Name != "machine time held back over 150 us idle" || f.Measured != 0.6 {
		t.Errorf("held-back figure %+v, want 0.6%% (1.2 ms of 200 ms)", f)
	}
	if f := r.rep.Figures[4]; f.Name != "machine timer wake-up lateness mean idle" || f.Measured != 4 {
		t.Errorf("mean figure %+v, want 4 us", f)
	}

	quiet := late
	quiet.Over150us, quiet.Over500us, quiet.LateMaxNs = 0, 0, 140_000
	r = newRep()
	r.machineFigures("idle", quiet, 0, -1, 1)
	if r.rep.Figures[1].Note != "" || len(r.rep.Warnings) != 0 {
		t.Errorf("a quiet machine was blamed: %q %q", r.rep.Figures[1].Note, r.rep.Warnings)
	}
	if got := len(r.rep.Figures); got != 6 {
		t.Errorf("%d figures, want 4 + mean and max (steal unknown)", got)
	}
}
