package calibrate

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/internal/control"
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
	c, err := r.cpuTCP(ends, uint64(cpuLoad/8), "paced", "veth")
	if err != nil {
		t.Fatal(err)
	}
	if c.Error != "" || c.GoodputBps < 50e6 || c.GoodputBps > 105e6 || c.CorePercent <= 0 || c.Baseline != "veth" {
		t.Errorf("paced TCP: %+v", c)
	}
	// The same load over veth is measured beside it, and the forwarder's
	// system calls were counted.
	if c.VethGoodputBps < 50e6 || c.VethGoodputBps > 105e6 ||
		c.SyscallsPerPacket <= 0 || c.WakeupsPerPacket <= 0 || c.WakeupsPerPacket > c.SyscallsPerPacket {
		t.Errorf("paced TCP, veth and system call figures: %+v", c)
	}
	machineWorked(t, "paced TCP", c)
	// Through the emulator's own 100 Mbit/s, an unpaced sender arrives at
	// no more than the rate (2% for headers and measurement edges), and the
	// run's links are back afterwards.
	figures, err := r.cpuFigures(ends)
	if err != nil {
		t.Fatal(err)
	}
	// The run's link is "delay 1ms": the fourth figure goes through it.
	var names []string
	for _, f := range figures {
		names = append(names, f.name)
	}
	if want := []string{"tcp-paced", "udp-datagrams", "tcp-rate-limited", "tcp-paced-link"}; !slices.Equal(names, want) {
		t.Errorf("CPU figures %v, want %v", names, want)
	}
	c, err = r.takeCPU(figures[2])
	if err != nil || c.Error != "" || c.GoodputBps < 50e6 || c.GoodputBps > 102e6 || c.CorePercent <= 0 {
		t.Errorf("TCP through %q: %+v, %v", cpuRateLink, c, err)
	}
	// Behind the emulator's rate every wire packet leaves by itself: at
	// least one write per packet delivered. The baseline went through the
	// kernel's tbf at the same rate, so it arrived at no more than it.
	if c.SyscallsPerPacket < 1 || !strings.Contains(c.Baseline, "tbf") || c.VethGoodputBps < 50e6 || c.VethGoodputBps > 102e6 {
		t.Errorf("TCP through %q: %.2f system calls per packet (want at least 1), baseline %q at %.1f Mbit/s",
			cpuRateLink, c.SyscallsPerPacket, c.Baseline, c.VethGoodputBps/1e6)
	}
	machineWorked(t, "TCP through "+cpuRateLink, c)
	// Through the run's own link there is no baseline.
	if c, err = r.takeCPU(figures[3]); err != nil || c.Error != "" || c.Baseline != "" || c.VethGoodputBps != 0 || c.NetPercent != 0 || c.MachinePercent < 0 || c.CorePercent <= 0 {
		t.Errorf("TCP through the run's link: %+v, %v", c, err)
	}
	// The shaper is gone from the veth pair afterwards.
	if bps, err := ends.veth.goodput(r.ctx, protoTCP, 300*time.Millisecond, 0, nil); err != nil || bps < 300e6 {
		t.Errorf("veth after the rated CPU figure: %.1f Mbit/s, %v; want it unshaped", bps/1e6, err)
	}
	if up, down, _ := r.tb.Links(); up.String() != r.links[0].String() || down.String() != r.links[1].String() {
		t.Errorf("links after the rated CPU figure: %q / %q, want %q / %q", up, down, r.links[0], r.links[1])
	}
	// The only children left are the two servers and the CPU figures'
	// soaker, which the run keeps until it closes.
	if r.soak == nil {
		t.Fatal("no soaker after the CPU figures")
	}
	soakPID := r.soak.p.Cmd.Process.Pid
	if pids := childPIDs(t); len(pids) != 3 || !slices.Contains(pids, soakPID) {
		t.Errorf("child processes between transfers: %v, want the two servers and the soaker %d", pids, soakPID)
	}
	if err := r.soak.Close(); err != nil {
		t.Fatal(err)
	}
	if pids := childPIDs(t); len(pids) != 2 || slices.Contains(pids, soakPID) {
		t.Errorf("child processes after the soaker's Close: %v, want the two servers", pids)
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

// Each of BulkCommand's roles serves exactly its operations of package
// control.
func TestBulkRolesServeTheirTables(t *testing.T) {
	var ends bulkServers
	for role, s := range map[string]*control.Server{
		bulkRoleServer: ends.server(),
		bulkRoleClient: bulkClient(),
		bulkRoleSoak:   soakServer(nil),
	} {
		if err := s.Check(); err != nil {
			t.Errorf("%s: %v", role, err)
		}
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

// machineWorked checks a CPU figure's soaker figures for what holds
// whatever else the machine is doing (other tests run beside this one, so
// no amount of CPU can be expected): each is a share of the machine's
// cores, and the emulator's own cost is their scaled difference.
func machineWorked(t *testing.T, what string, c CPU) {
	t.Helper()
	cores := 100 * float64(runtime.NumCPU())
	if c.MachinePercent < 0 || c.MachinePercent > cores || c.VethMachinePercent < 0 || c.VethMachinePercent > cores {
		t.Errorf("%s: CPU taken %.2f%% through the emulator, %.2f%% over the baseline; want within [0, %.0f]", what, c.MachinePercent, c.VethMachinePercent, cores)
	}
	if want := c.MachinePercent - c.VethMachinePercent*c.GoodputBps/c.VethGoodputBps; math.Abs(c.NetPercent-want) > 1e-9 {
		t.Errorf("%s: net %.4f%%, want %.4f%%", what, c.NetPercent, want)
	}
}

// TestCPUFigures checks the arithmetic of the CPU figures on made-up
// marks: 2 s of wall time, the threads' CPU, the soaker's lost rate
// against its quiet one, system calls per delivered packet, and the veth
// baseline scaled to the emulated goodput.
func TestCPUFigures(t *testing.T) {
	idle := []float64{1000, 2000} // units per second, per CPU
	mk := func(ns int64, counts ...uint64) soakMark { return soakMark{Ns: ns, Counts: counts} }
	a := costMark{threads: time.Second, soak: mk(1e9, 100, 100)}
	// In 2 s, CPU 0 did 1500 of its 2000 units (25% taken), CPU 1 3000 of
	// its 4000 (25%): half a core.
	b := costMark{threads: time.Second + 300*time.Millisecond, soak: mk(3e9, 1600, 3100)}
	a.fwd[0] = forward.Stats{Reads: 10, Writes: 10, Wakeups: 10}
	b.fwd[0] = forward.Stats{Reads: 110, EmptyReads: 50, Writes: 1010, Wakeups: 610, ReadErrors: 1, WriteErrors: 1}
	a.fwd[1] = forward.Stats{Reads: 5, Writes: 5, Wakeups: 5}
	b.fwd[1] = forward.Stats{Reads: 205, Writes: 205, Wakeups: 105}
	b.ctr[0] = emu.Counters{PacketsOut: 1000}
	b.ctr[1] = emu.Counters{PacketsOut: 200}
	c := CPU{GoodputBps: 90e6}
	if err := c.setEmulated(a, b, idle); err != nil {
		t.Fatal(err)
	}
	// up: 600 wake-ups + 100 reads + 50 empty + 1 read error + 1000 writes + 1
	// write error = 1752; down: 100 + 200 + 200 = 500; 1200 packets.
	if c.CorePercent != 15 || math.Abs(c.MachinePercent-50) > 1e-9 ||
		c.SyscallsPerPacket != 2252.0/1200 || c.WakeupsPerPacket != 700.0/1200 {
		t.Errorf("emulated figures: %+v", c)
	}
	// 1 s: CPU 0 lost 10%, CPU 1 20%: 30% of a core for 100 Mbit/s is 27%
	// for the 90 Mbit/s that arrived.
	v0, v1 := costMark{soak: mk(10e9, 0, 0)}, costMark{soak: mk(11e9, 900, 1600)}
	if err := c.setBaseline(v0, v1, idle, 100e6); err != nil {
		t.Fatal(err)
	}
	if math.Abs(c.VethMachinePercent-30) > 1e-9 || c.VethGoodputBps != 100e6 || math.Abs(c.NetPercent-23) > 1e-9 {
		t.Errorf("veth figures: %+v", c)
	}
	// A CPU over its quiet rate counts as nothing taken, not a negative
	// share.
	if got, err := coresTaken(idle, mk(1e9, 1100, 1900), mk(0, 0, 0)); err != nil || math.Abs(got-0.05) > 1e-9 {
		t.Errorf("clamped: %v, %v; want 0.05", got, err)
	}
	// Marks out of order, of another CPU count, or no quiet rate.
	for _, bad := range []struct {
		idle []float64
		b, a soakMark
	}{
		{idle, mk(0, 1, 1), mk(1, 0, 0)},
		{idle, mk(1, 1), mk(0, 0)},
		{[]float64{0, 1}, mk(1, 1, 1), mk(0, 0, 0)},
	} {
		if _, err := coresTaken(bad.idle, bad.b, bad.a); err == nil {
			t.Errorf("coresTaken(%v, %+v, %+v) accepted", bad.idle, bad.b, bad.a)
		}
	}
	// No baseline without a baseline goodput.
	d := CPU{GoodputBps: 90e6, MachinePercent: 40}
	if err := d.setBaseline(v0, v1, idle, 0); err != nil || d.VethMachinePercent != 0 || d.NetPercent != 0 {
		t.Errorf("baseline without goodput: %+v, %v", d, err)
	}
}

// TestSoaker runs the soaker child: a process spinning on CPU 0 at normal
// priority leaves CPU 0's SCHED_IDLE soaker almost nothing (other load can
// only take more), and the soaker ends when its stdin closes.
func TestSoaker(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s, err := startSoaker(context.Background(), exe)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// One counting thread per CPU under SCHED_IDLE, read from the kernel
	// once the soaker answers (it serves marks only when every thread is
	// set up).
	if _, err := s.mark(); err != nil {
		t.Fatal(err)
	}
	if n, want := idleThreads(t, s.p.Cmd.Process.Pid), runtime.NumCPU(); n != want {
		t.Fatalf("soaker has %d SCHED_IDLE threads, want one per CPU (%d)", n, want)
	}
	// The spinner is a shell busy loop pinned to CPU 0: a process of its
	// own, which the Go scheduler of this test cannot park (a locked
	// goroutine waits for a P whenever the runtime preempts it, and CPU 0
	// then idles into the soaker).
	spin := exec.Command("/bin/sh", "-c", "while :; do :; done")
	if err := spin.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		spin.Process.Kill()
		spin.Wait()
	}()
	var set unix.CPUSet
	set.Set(0)
	if err := unix.SchedSetaffinity(spin.Process.Pid, &set); err != nil {
		t.Fatal(err)
	}
	// Windows with the spinner stopped and running alternate, so that
	// both see the same machine: go test runs packages in parallel, and a
	// quiet rate measured seconds apart from the loaded one varied 15-fold
	// under that load. A soaker that did not yield would share CPU 0 with
	// the spinner (half its quiet units); one that yields gets what the
	// scheduler leaves a SCHED_IDLE thread beside a busy one, which
	// reached 10.4% over 0.3 s in one CI run (a VM's time slices): the
	// bound is a quarter. The rounds go on (at most 40) until the quiet
	// windows on CPU 0 add up to a second and have counted work.
	var quiet, busy []float64
	var quietTime time.Duration
	for round := 0; round < 40 && (quietTime < time.Second || quiet[0] == 0); round++ {
		q, dq, err := soakWindow(s, spin.Process, unix.SIGSTOP)
		if err != nil {
			t.Fatal(err)
		}
		b, _, err := soakWindow(s, spin.Process, unix.SIGCONT)
		if err != nil {
			t.Fatal(err)
		}
		if quiet == nil {
			quiet, busy = make([]float64, len(q)), make([]float64, len(b))
		}
		for i := range q {
			quiet[i] += q[i]
			busy[i] += b[i]
		}
		quietTime += dq
	}
	if slices.Contains(quiet, 0) {
		t.Fatalf("units counted per CPU in %v with the spinner stopped: %v, want every CPU to work", quietTime, quiet)
	}
	t.Logf("CPU 0: %.0f units with the spinner running, %.0f stopped (%.1f%%), over %v each", busy[0], quiet[0], 100*busy[0]/quiet[0], quietTime)
	if busy[0] > 0.25*quiet[0] {
		t.Errorf("CPU 0 soaker counted %.0f units with a process spinning there, against %.0f in as long with it stopped: want under a quarter (a soaker that did not yield would get half)", busy[0], quiet[0])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if st := s.p.Cmd.ProcessState; st == nil || !st.Exited() {
		t.Errorf("soaker after Close: %v", st)
	}
}

// soakWindow sends sig to spinner, lets it take effect, and returns each
// CPU's units counted over the next 200 ms and the window's length.
func soakWindow(s *soaker, spinner *os.Process, sig unix.Signal) ([]float64, time.Duration, error) {
	if err := spinner.Signal(sig); err != nil {
		return nil, 0, err
	}
	time.Sleep(20 * time.Millisecond)
	a, err := s.mark()
	if err != nil {
		return nil, 0, err
	}
	time.Sleep(200 * time.Millisecond)
	b, err := s.mark()
	if err != nil {
		return nil, 0, err
	}
	r, err := rates(b, a)
	if err != nil {
		return nil, 0, err
	}
	dt := time.Duration(b.Ns - a.Ns)
	for i := range r {
		r[i] *= dt.Seconds() // units counted in the window
	}
	return r, dt, nil
}

// idleThreads counts the threads of process pid whose scheduling policy
// is SCHED_IDLE (field 41 of /proc/PID/task/TID/stat).
func idleThreads(t *testing.T, pid int) int {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // a thread that ended
		}
		// the command name (field 2) may hold spaces: fields count from
		// the last ')'
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 38 && f[38] == strconv.Itoa(unix.SCHED_IDLE) {
			n++
		}
	}
	return n
}
