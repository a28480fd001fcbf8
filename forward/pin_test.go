package forward

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/emu/spec"
	"golang.org/x/sys/unix"
)

// TestPinnedThreads checks that Options.CPUs pins every forwarding thread,
// and that a CPU the process may not use is refused.
func TestPinnedThreads(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	last := -1
	for c := range 1024 {
		if set.IsSet(c) {
			last = c
		}
	}
	fwd, err := startPinned(t, []int{last})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range fwd.paths {
		for p.tid.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(int(p.tid.Load())) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		var allowed string
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				allowed = strings.TrimSpace(v)
			}
		}
		if allowed != strconv.Itoa(last) {
			t.Errorf("path %s: thread allowed on CPUs %q, want %d", p.name, allowed, last)
		}
	}
	if err := fwd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := startPinned(t, []int{1023}); err == nil || !strings.Contains(err.Error(), "CPU 1023") {
		t.Errorf("pinning to CPU 1023: err %v", err)
	}
}

// startPinned starts a two-path pass-through forwarder pinned to cpus.
func startPinned(t *testing.T, cpus []int) (*Forwarder, error) {
	var paths []Path
	for _, name := range []string{"up", "down"} {
		pool := emu.NewPool(64, 2048)
		l, _ := pipeline.New(spec.Link{}, 1, pool)
		paths = append(paths, Path{Name: name, From: newPair(t, name+"-in").dev, To: newPair(t, name+"-out").dev, Link: l, Pool: pool})
	}
	return Start(emu.MonotonicClock(), Options{CPUs: cpus}, paths...)
}
