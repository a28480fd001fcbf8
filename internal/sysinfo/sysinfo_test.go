package sysinfo

import (
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	in := []byte("cpu  100 5 50 800 20 3 2 10 7 1\ncpu0 1 2 3 4\n")
	got, err := parseProcStat(in)
	if err != nil {
		t.Fatal(err)
	}
	// busy = user+nice+system+irq+softirq+steal = 100+5+50+3+2+10 = 170
	// total = busy + idle + iowait = 170 + 800 + 20 = 990 (guest fields excluded)
	if got.Busy != 170 || got.Total != 990 || got.Steal != 10 {
		t.Fatalf("got %+v, want busy 170 total 990 steal 10", got)
	}
	if _, err := parseProcStat([]byte("intr 1 2 3\n")); err == nil {
		t.Fatal("want error for a first line that is not cpu")
	}
	if _, err := parseProcStat([]byte("cpu 1 x 3 4 5\n")); err == nil {
		t.Fatal("want error for a non-numeric field")
	}
}

func TestStealBetween(t *testing.T) {
	if d := StealBetween(CPUTimes{Steal: 10}, CPUTimes{Steal: 13}); d != 30*time.Millisecond {
		t.Fatalf("3 ticks: got %v, want 30ms", d)
	}
	if d := StealBetween(CPUTimes{Steal: 13}, CPUTimes{Steal: 10}); d != 0 {
		t.Fatalf("a counter that went back: got %v, want 0", d)
	}
}

func TestUtilisation(t *testing.T) {
	if u := Utilisation(CPUTimes{Busy: 10, Total: 100}, CPUTimes{Busy: 60, Total: 200}); u != 0.5 {
		t.Fatalf("got %v want 0.5", u)
	}
	if u := Utilisation(CPUTimes{Total: 5}, CPUTimes{Total: 5}); u != -1 {
		t.Fatalf("no elapsed time: got %v want -1", u)
	}
}

func TestEnvironment(t *testing.T) {
	env := Environment()
	if env.GoVersion == "" || env.CPUs < 1 || env.Kernel == "" {
		t.Fatalf("incomplete environment: %+v", env)
	}
}
