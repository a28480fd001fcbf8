package calibrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/internal/control"
)

// The emulator's CPU cost as what it takes from a competing workload.
//
// Neither per-thread CPU time nor the machine's idle counters see all of
// what moving packets costs. Interrupts and the softirqs they run (the
// kernel's tbf shaper fires a timer per packet and delivers the packet in
// a softirq; a packet's arrival wakes its reader with an inter-processor
// interrupt) are charged to whatever task was running, or, on an idle CPU,
// counted as idle: they run between the halt and the idle loop's exit.
// In a virtual machine, the exits to the hypervisor that timers, halts and
// IPIs cause are not charged to anything at all.
//
// A soaker counts instead: one thread per CPU, pinned to it, under
// SCHED_IDLE (it runs only when nothing else wants the CPU, and any other
// task preempts it at once), does a fixed unit of arithmetic over and over
// and counts the units. Whatever else the CPU does, however it is
// accounted, is time the soaker does not count. Its rate on the quiet
// machine, measured in the same run, is the reference; the CPU a load
// takes is the rate it lost, in cores. This is the question that matters
// for quicbench: how much CPU the emulator leaves to the endpoints under
// test. It also means that the CPUs never halt while it runs, so wake-ups
// cost what they cost on a busy machine, where the emulator's CPU matters.

// bulkRoleSoak is the soaker role of BulkCommand.
const bulkRoleSoak = "soak"

// soakUnit is the arithmetic counted as one unit: a chain of dependent
// multiply-adds, about a microsecond on current CPUs.
const soakUnit = 1000

// soakMark is the soaker's reply to a request: the time (CLOCK_MONOTONIC,
// ns) and each CPU's units so far.
type soakMark struct {
	Ns     int64    `json:"ns"`
	Counts []uint64 `json:"counts"`
}

// soakSlot is one CPU's counter, alone on its cache line.
type soakSlot struct {
	n atomic.Uint64
	x uint64
	_ [48]byte
}

// soakMain runs the soaker: one SCHED_IDLE thread pinned to each CPU of
// the process's affinity mask, and the soaker role of package control on
// in and out (a soakMark for every control.Mark), until in ends. It fails when a thread cannot be
// pinned or given SCHED_IDLE.
func soakMain(ctx context.Context, in io.Reader, out io.Writer) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("%s %s: affinity: %w", BulkCommand, bulkRoleSoak, err)
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	// Each soaker keeps a P; the goroutine answering requests needs one
	// more.
	runtime.GOMAXPROCS(len(cpus) + 2)
	slots := make([]soakSlot, len(cpus))
	ready := make(chan error, len(cpus))
	for i, c := range cpus {
		go soakCPU(c, &slots[i], ready)
	}
	for range cpus {
		if err := <-ready; err != nil {
			return fmt.Errorf("%s %s: %w", BulkCommand, bulkRoleSoak, err)
		}
	}
	if err := soakServer(slots).Serve(ctx, in, out); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// soakServer is the soaker role, reading the counters in slots.
func soakServer(slots []soakSlot) *control.Server {
	s := control.NewServer(control.RoleSoaker)
	control.Handle(s, control.Mark, func(context.Context, struct{}) (soakMark, error) {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			return soakMark{}, err
		}
		m := soakMark{Ns: ts.Nano(), Counts: make([]uint64, len(slots))}
		for i := range slots {
			m.Counts[i] = slots[i].n.Load()
		}
		return m, nil
	})
	return s
}

// soakCPU pins the calling goroutine's thread to cpu under SCHED_IDLE,
// reports the outcome on ready and, if it succeeded, counts units in slot
// forever. The thread stays locked: it ends with the process.
func soakCPU(cpu int, slot *soakSlot, ready chan<- error) {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	err := unix.SchedSetaffinity(0, &set)
	if err != nil {
		err = fmt.Errorf("pinning a thread to CPU %d: %w", cpu, err)
	} else if err = unix.SchedSetAttr(0, &unix.SchedAttr{Policy: unix.SCHED_IDLE}, 0); err != nil {
		err = fmt.Errorf("SCHED_IDLE on CPU %d: %w", cpu, err)
	}
	ready <- err
	if err != nil {
		return
	}
	x := uint64(cpu) + 1
	for {
		for range soakUnit {
			x = x*6364136223846793005 + 1442695040888963407
		}
		slot.x = x
		slot.n.Add(1)
	}
}

// soaker is a running soaker child process.
type soaker struct {
	p *bulkProc
	// last is each CPU's units per second with nothing else running, as
	// quiet last measured it.
	last []float64
}

// soakIdleWindow is how long the soaker's quiet rate is measured, before
// and after each figure's loads.
const soakIdleWindow = time.Second

// startSoaker starts the soaker child (exe BulkCommand soak) in the
// process's own namespace: it needs no network. It is killed with this
// process, and ends by itself when its stdin closes.
func startSoaker(ctx context.Context, exe string) (*soaker, error) {
	cmd := exec.CommandContext(ctx, exe, BulkCommand, bulkRoleSoak)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := startBulkCmd(cmd, bulkRoleSoak)
	if err != nil {
		return nil, fmt.Errorf("soaker: %w", err)
	}
	return &soaker{p: p}, nil
}

// mark asks the soaker for its counts.
func (s *soaker) mark() (soakMark, error) {
	var m soakMark
	if err := s.p.ctl.Call(context.Background(), control.Mark, nil, &m); err != nil {
		return m, fmt.Errorf("soaker: %v (%s)", err, s.p.Describe())
	}
	return m, nil
}

// quiet measures the soaker's rate over d with nothing else running (the
// caller's business) into s.last.
func (s *soaker) quiet(d time.Duration) error {
	a, err := s.mark()
	if err != nil {
		return err
	}
	time.Sleep(d)
	b, err := s.mark()
	if err != nil {
		return err
	}
	r, err := rates(b, a)
	if err != nil {
		return err
	}
	s.last = r
	return nil
}

// rates returns each CPU's units per second from a to b.
func rates(b, a soakMark) ([]float64, error) {
	dt := float64(b.Ns-a.Ns) / 1e9
	if dt <= 0 || len(a.Counts) != len(b.Counts) || len(a.Counts) == 0 {
		return nil, errors.New("soaker: marks out of order or of different CPUs")
	}
	r := make([]float64, len(a.Counts))
	for i := range r {
		r[i] = float64(b.Counts[i]-a.Counts[i]) / dt
	}
	return r, nil
}

// coresTaken returns the CPU, in cores, that everything but the soaker used
// from a to b: each CPU's lost share of its quiet rate idle, clamped to
// [0, 1] (a load cannot take more than the CPU, nor less than nothing; a
// share outside is the rate's noise), summed.
func coresTaken(idle []float64, b, a soakMark) (float64, error) {
	r, err := rates(b, a)
	if err != nil {
		return 0, err
	}
	if len(idle) != len(r) {
		return 0, fmt.Errorf("soaker: %d CPUs measured quiet, %d loaded", len(idle), len(r))
	}
	var cores float64
	for i := range r {
		if idle[i] <= 0 {
			return 0, fmt.Errorf("soaker: CPU %d did no work on the quiet machine", i)
		}
		cores += min(max(1-r[i]/idle[i], 0), 1)
	}
	return cores, nil
}

// Close ends the soaker (end of its stdin) and reaps it.
func (s *soaker) Close() error {
	s.p.Stop(time.Second)
	return nil
}
