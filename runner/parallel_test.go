package runner

import (
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

func TestBlocksOf(t *testing.T) {
	cells := []model.Cell{
		{ID: 1, Key: "a/h2", Group: "a", Protocol: "h2", Iterations: 2, Warmup: true},
		{ID: 2, Key: "a/h3", Group: "a", Protocol: "h3", Iterations: 2, Warmup: true},
		{ID: 3, Key: "b/h2", Group: "b", Protocol: "h2", Iterations: 1},
	}
	est := map[string]time.Duration{"a/h2": time.Second, "a/h3": 2 * time.Second, "b/h2": 5 * time.Second}
	blocks := blocksOf(Schedule(cells, 3), est)
	// a: warm-up, 0, 1; b: 0.
	if len(blocks) != 4 {
		t.Fatalf("%d blocks, want 4", len(blocks))
	}
	for i, want := range []struct {
		group string
		it    int
		n     int
		est   time.Duration
	}{{"a", -1, 2, 3 * time.Second}, {"a", 0, 2, 3 * time.Second}, {"a", 1, 2, 3 * time.Second}, {"b", 0, 1, 5 * time.Second}} {
		b := blocks[i]
		if b.group != want.group || len(b.steps) != want.n || b.est != want.est {
			t.Errorf("block %d: group %s, %d steps, estimate %v; want %s, %d, %v", i, b.group, len(b.steps), b.est, want.group, want.n, want.est)
		}
		for _, s := range b.steps {
			if s.Iteration != want.it || s.Seed != b.steps[0].Seed {
				t.Errorf("block %d: step of iteration %d seed %d in a block of iteration %d seed %d", i, s.Iteration, s.Seed, want.it, b.steps[0].Seed)
			}
		}
	}
}

func TestConcurrency(t *testing.T) {
	var c concurrency
	c.begin(0)
	c.begin(1)
	c.begin(2)
	if n := c.end(1); n != 3 {
		t.Errorf("sample beside 2 others: concurrency %d, want 3", n)
	}
	c.begin(1) // a later sample of testbed 1 starts with 3 active
	if n := c.end(0); n != 3 {
		t.Errorf("testbed 0: concurrency %d, want 3", n)
	}
	if n := c.end(2); n != 3 {
		t.Errorf("testbed 2: concurrency %d, want 3", n)
	}
	if n := c.end(1); n != 3 {
		t.Errorf("testbed 1's second sample: concurrency %d, want 3", n)
	}
	c.begin(0)
	if n := c.end(0); n != 1 {
		t.Errorf("a sample alone: concurrency %d, want 1", n)
	}
}

func TestPickSlot(t *testing.T) {
	plain, withBrowser := &slot{id: 1}, &slot{id: 2, browser: true}
	for _, tc := range []struct {
		name          string
		idle          []*slot
		browser, more bool
		want          int
	}{
		{"browser block: the testbed that holds browsers", []*slot{plain, withBrowser}, true, true, 1},
		{"browser block, no such testbed idle, more allowed: a plain one", []*slot{plain}, true, true, 0},
		{"browser block, no such testbed idle, no more allowed: wait", []*slot{plain}, true, false, noSlot},
		{"browser block, none idle, more allowed: build one", nil, true, true, newSlot},
		{"browser block, none idle, no more allowed: wait", nil, true, false, noSlot},
		{"other block: a plain testbed first", []*slot{withBrowser, plain}, false, false, 1},
		{"other block: a browser testbed when no plain one is idle", []*slot{withBrowser}, false, false, 0},
		{"other block, none idle: build one", nil, false, true, newSlot},
	} {
		if got := pickSlot(tc.idle, tc.browser, tc.more); got != tc.want {
			t.Errorf("%s: pickSlot = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLimitsFor(t *testing.T) {
	const gb = 1 << 30
	builtin := []model.Cell{{Client: model.ClientBuiltin}}
	browsers := []model.Cell{{Client: "chromium"}, {Client: "firefox"}}
	for _, tc := range []struct {
		name                                string
		n, cpus                             int
		avail                               int64
		nofile                              uint64
		cells                               []model.Cell
		slots, cpuCap, memCap, fileCap, brw int
	}{
		{"one testbed: no other limit", 1, 2, 22 * gb, 20000, browsers, 1, 64, 0, 0, 0},
		{"64 on 2 CPUs, plenty of memory", 64, 2, 22 * gb, 20000, builtin, 64, 64, 264, 621, 0},
		{"above the CPU cap", 100, 2, 22 * gb, 20000, builtin, 64, 64, 264, 621, 0},
		{"browsers: the memory left holds 14 testbeds' browsers", 64, 2, 22 * gb, 20000, browsers, 64, 64, 264, 621, 14},
		{"little memory caps the testbeds", 64, 2, 2 * gb, 20000, builtin, 24, 64, 24, 621, 0},
		{"a low open files limit caps them", 64, 2, 22 * gb, 1024, builtin, 28, 64, 264, 28, 0},
		{"memory and files unknown: the CPU cap", 64, 2, 0, 0, browsers, 64, 64, 0, 0, 0},
	} {
		l := limitsFor(tc.n, tc.cpus, tc.avail, tc.nofile, tc.cells)
		if l.slots != tc.slots || l.cpuCap != tc.cpuCap || l.memCap != tc.memCap || l.fileCap != tc.fileCap || l.browsers != tc.brw {
			t.Errorf("%s: %+v; want slots %d, caps CPU %d memory %d files %d, browsers %d", tc.name, l, tc.slots, tc.cpuCap, tc.memCap, tc.fileCap, tc.brw)
		}
	}
}
