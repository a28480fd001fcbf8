package calibrate

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/netns"
)

// heldNamespaces lists the file descriptors of this process that hold a
// network namespace other than its own, or a TUN device: every testbed's
// and veth pair's namespaces and devices are such descriptors, so none may
// be left after a run.
func heldNamespaces(t *testing.T) []string {
	t.Helper()
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && ((strings.HasPrefix(l, "net:[") && l != own) || l == "/dev/net/tun") {
			out = append(out, l)
		}
	}
	return out
}

// TestRunParallelStructure runs two testbeds at once with few probes and
// checks the report's structure (never its precision: a timing figure is a
// benchmark's, BenchmarkParallelDelayPrecision), and that every testbed is
// gone afterwards.
func TestRunParallelStructure(t *testing.T) {
	requireRoot(t)
	l := mustParse(t, "delay 5ms rate 10mbit")
	rep, err := RunParallel(context.Background(), Config{Up: l, Down: l, Seed: 3, Packets: 300}, []int{2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Parallel) != 1 || rep.Up != "delay 5ms rate 10mbit" || rep.Packets != 300 || rep.Figures == nil {
		t.Fatalf("report: %+v", rep)
	}
	res := rep.Parallel[0]
	if res.Testbeds != 2 || res.FloorP50Us <= 0 || res.FloorP99Us < res.FloorP50Us || len(res.Phases) != 2 {
		t.Fatalf("result: %+v", res)
	}
	names := map[string]bool{}
	for i, ph := range res.Phases {
		if want := []string{"idle", "load"}[i]; ph.Phase != want {
			t.Errorf("phase %d is %q, want %q", i, ph.Phase, want)
		}
		if ph.Seconds <= 0 || ph.CPUBusyPercent < 0 || ph.CPUBusyPercent > 100 || ph.FloorP50Us <= 0 {
			t.Errorf("%s: seconds %v, CPU busy %v, floor %v", ph.Phase, ph.Seconds, ph.CPUBusyPercent, ph.FloorP50Us)
		}
		if (ph.LoadBps > 0) != (ph.Phase == "load") {
			t.Errorf("%s: load %v bit/s", ph.Phase, ph.LoadBps)
		}
		if len(ph.Testbeds) != 2 {
			t.Fatalf("%s: %d testbeds", ph.Phase, len(ph.Testbeds))
		}
		total := 0
		for _, tb := range ph.Testbeds {
			names[tb.Name] = true
			if tb.Sent != 600 || tb.Received == 0 || tb.Up.Probes == 0 || tb.Down.Probes == 0 {
				t.Errorf("%s, testbed %s: %+v", ph.Phase, tb.Name, tb)
			}
			if tb.Up.P99Us < tb.Up.P50Us || tb.Down.MaxUs < tb.Down.P99Us {
				t.Errorf("%s, testbed %s: quantiles out of order: %+v", ph.Phase, tb.Name, tb)
			}
			total += tb.Up.Probes + tb.Down.Probes
		}
		if ph.Pooled.Probes != total || ph.Pooled.P99Us < ph.Pooled.P50Us || ph.WorstP99Us < ph.Pooled.P50Us || ph.WorstTestbed == "" {
			t.Errorf("%s: pooled %+v over %d probes, worst %q %v", ph.Phase, ph.Pooled, total, ph.WorstTestbed, ph.WorstP99Us)
		}
	}
	if len(names) != 2 {
		t.Errorf("testbeds %v, want 2 distinct", names)
	}
	// Judged figures: pooled and worst p50 and p99, per phase.
	if len(rep.Figures) != 8 {
		t.Errorf("%d figures, want 8", len(rep.Figures))
	}
	for _, f := range rep.Figures {
		if !strings.HasPrefix(f.Name, "parallel 2, ") || (f.Status != StatusOK && f.Status != StatusFail) || f.Configured == nil {
			t.Errorf("figure %+v", f)
		}
	}
	if rep.OK != (len(rep.Failed()) == 0) || res.OK != rep.OK {
		t.Errorf("OK %v, result OK %v, %d failed", rep.OK, res.OK, len(rep.Failed()))
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil || !strings.Contains(b.String(), "parallel testbeds: per-packet delay error") {
		t.Errorf("table (%v):\n%s", err, b.String())
	}

	// Removed: no namespace bound under /run/netns, no persistent
	// testbed, and no namespace or TUN device left open.
	infos, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range infos {
		if names[i.Name] {
			t.Errorf("testbed %s still listed", i.Name)
		}
	}
	for name := range names {
		for _, side := range []string{"-c", "-s"} {
			if _, err := os.Lstat("/run/netns/" + netns.Prefix + name + side); err == nil {
				t.Errorf("namespace %s%s%s left behind", netns.Prefix, name, side)
			}
		}
	}
	if held := heldNamespaces(t); len(held) > 0 {
		t.Errorf("namespaces or TUN devices still open after the run: %q", held)
	}
}

func TestParseParallel(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{"4", []int{4}, ""},
		{"1,4, 8,16", []int{1, 4, 8, 16}, ""},
		{"0", nil, "0 testbeds: want 1 to 64"},
		{"65", nil, "65 testbeds"},
		{"abc", nil, `"abc" is not a number`},
		{"1,x", nil, `"x" is not a number`},
		{"", nil, `"" is not a number`},
		{"-2", nil, "-2 testbeds"},
	} {
		got, err := ParseParallel(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseParallel(%q) = %v, %v; want an error about %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("ParseParallel(%q) = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("ParseParallel(%q) = %v, want %v", c.in, got, c.want)
			}
		}
	}
}

func TestRunParallelRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		ns   []int
		cfg  Config
		want string
	}{
		{nil, Config{}, "no number"},
		{[]int{0}, Config{}, "0 parallel testbeds"},
		{[]int{2, MaxParallel + 1}, Config{}, "65 parallel testbeds"},
		{[]int{2}, Config{Packets: 5}, "5 probes"},
	} {
		_, err := RunParallel(context.Background(), c.cfg, c.ns)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RunParallel(%v) = %v, want an error about %q", c.ns, err, c.want)
		}
	}
}
