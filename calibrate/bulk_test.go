package calibrate

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/netns"
)

// childPIDs lists the processes whose parent is this one.
func childPIDs(t *testing.T) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == os.Getpid() {
			pid, _ := strconv.Atoi(strings.Fields(s)[0])
			pids = append(pids, pid)
		}
	}
	return pids
}

// nsOf returns the network namespace ("net:[inode]") of side s of e.
func nsOf(t *testing.T, e doer, s netns.Side) string {
	t.Helper()
	var ns string
	if err := e.Do(s, func() error {
		var err error
		ns, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// The throughput phase's endpoints are processes of their own in their
// namespaces (not goroutines of the process hosting the emulator); they
// report the measured window; nothing is left once they are closed.
func TestBulkEndpointsAreChildProcesses(t *testing.T) {
	requireRoot(t)
	l := mustParse(t, "delay 1ms")
	r, err := newRun(context.Background(), Config{Up: l, Down: l, Seed: 1, Packets: 100, Duration: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if pids := childPIDs(t); len(pids) != 0 {
		t.Fatalf("child processes before the bulk endpoints: %v", pids)
	}
	ends, err := r.startBulkEnds()
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			ends.Close()
		}
	}()
	for name, end := range map[string]*bulkEnd{"veth": ends.veth, "emulated": ends.emulated} {
		pid := end.srv.Cmd.Process.Pid
		ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err != nil {
			t.Fatal(err)
		}
		if want := nsOf(t, end.e, netns.Server); ns != want {
			t.Errorf("%s: the bulk server runs in %s, not in the server namespace %s", name, ns, want)
		}
		for _, p := range bulkProtos {
			var events []bool
			bps, err := end.goodput(r.ctx, p, 500*time.Millisecond, 0, func(start bool) { events = append(events, start) })
			if err != nil || bps <= 0 {
				t.Errorf("%s %s: %v bit/s, %v", name, p, bps, err)
			}
			if len(events) != 2 || !events[0] || events[1] {
				t.Errorf("%s %s: window events %v, want start then end", name, p, events)
			}
		}
	}
	c := r.cpuTCP(ends.emulated, uint64(cpuLoad/8), "paced")
	if c.Error != "" || c.GoodputBps < 50e6 || c.GoodputBps > 105e6 || c.CorePercent <= 0 {
		t.Errorf("paced TCP: %+v", c)
	}
	// Through the emulator's own 100 Mbit/s, an unpaced sender arrives at
	// no more than the rate (2% for headers and measurement edges), and the
	// run's links are back afterwards.
	c, err = r.cpuRated(ends.emulated)
	if err != nil || c.Error != "" || c.GoodputBps < 50e6 || c.GoodputBps > 102e6 || c.CorePercent <= 0 {
		t.Errorf("TCP through %q: %+v, %v", cpuRateLink, c, err)
	}
	if up, down, _ := r.tb.Links(); up.String() != r.links[0].String() || down.String() != r.links[1].String() {
		t.Errorf("links after the rated CPU figure: %q / %q, want %q / %q", up, down, r.links[0], r.links[1])
	}
	// The only children left are the two servers.
	if pids := childPIDs(t); len(pids) != 2 {
		t.Errorf("child processes between transfers: %v, want the two servers", pids)
	}

	// A cancelled transfer ends at once and leaves no client behind.
	ctx, cancel := context.WithCancel(r.ctx)
	time.AfterFunc(700*time.Millisecond, cancel)
	t0 := time.Now()
	_, err = ends.veth.goodput(ctx, protoQUIC, time.Minute, 0, nil)
	if !errors.Is(err, context.Canceled) || time.Since(t0) > 10*time.Second {
		t.Errorf("cancelled transfer: %v after %v", err, time.Since(t0))
	}
	if pids := childPIDs(t); len(pids) != 2 {
		t.Errorf("child processes after a cancelled transfer: %v, want the two servers", pids)
	}

	closed = true
	if err := ends.Close(); err != nil {
		t.Fatal(err)
	}
	if pids := childPIDs(t); len(pids) != 0 {
		t.Errorf("child processes left after Close: %v", pids)
	}
}

func TestBulkMainRejectsBadInput(t *testing.T) {
	for _, c := range []struct{ role, in, want string }{
		{"bogus", "{}\n", "unknown role"},
		{"server", "not json\n", "bad configuration"},
		{"client", "", "reading the configuration"},
	} {
		err := BulkMain(context.Background(), c.role, strings.NewReader(c.in), io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("BulkMain(%q, %q) = %v, want an error about %q", c.role, c.in, err, c.want)
		}
	}
}
