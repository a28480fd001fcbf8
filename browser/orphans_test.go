package browser

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
	"golang.org/x/sys/unix"
)

// TestReapOrphansChargesTheirCPU: in a child subreaper, a grandchild that
// outlives its parent becomes this process's zombie; reapOrphans waits for
// it, which adds its CPU time to RUSAGE_CHILDREN (how the agent charges a
// killed browser's renderers to the sample), and leaves other children
// alone.
func TestReapOrphansChargesTheirCPU(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		testsupport.Unavailable(t, "PR_SET_CHILD_SUBREAPER: %v", err)
	}
	t.Cleanup(func() { unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	// A child in a group of its own, not ours to reap: it must survive.
	other := exec.Command("sleep", "30")
	other.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })

	// The parent exits at once; its child burns CPU, then exits, orphaned.
	sh := exec.Command("sh", "-c", `(i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done) & exit 0`)
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := sh.Process.Pid
	if err := sh.Wait(); err != nil {
		t.Fatal(err)
	}
	var before unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &before); err != nil {
		t.Fatal(err)
	}
	// Wait (bounded) until the orphan has become our zombie.
	deadline := time.Now().Add(60 * time.Second)
	for !hasZombieChild(pgid) {
		if time.Now().After(deadline) {
			t.Fatal("the orphaned grandchild never became a zombie child of this process")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := reapOrphans(pgid); n != 1 {
		t.Fatalf("reapOrphans reaped %d processes, want 1", n)
	}
	var after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_CHILDREN, &after); err != nil {
		t.Fatal(err)
	}
	if cpu := func(r unix.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }; cpu(after) <= cpu(before) {
		t.Errorf("RUSAGE_CHILDREN did not grow: %v -> %v", cpu(before), cpu(after))
	}
	if hasZombieChild(pgid) {
		t.Error("a zombie of the group is left")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the unrelated child was touched: %v", err)
	}
	if reapOrphans(0) != 0 {
		t.Error("reapOrphans(0) reaped something")
	}
}

func hasZombieChild(pgid int) bool {
	self := os.Getpid()
	for _, st := range processes() {
		if st.ppid == self && st.pgrp == pgid && st.state == 'Z' {
			return true
		}
	}
	return false
}
