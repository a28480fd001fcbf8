package browser

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestGroupUsage reads a real process group: a shell that burns CPU, then
// sleeps in a child. Both processes count, with their memory (RSS, PSS)
// and open files, and the CPU the shell spent; GroupCPU agrees with
// GroupUsage's CPU; a group that does not exist is an error.
func TestGroupUsage(t *testing.T) {
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL); _ = cmd.Wait() })
	var u Usage
	var err error
	for deadline := time.Now().Add(60 * time.Second); ; {
		if u, err = GroupUsage(pgid); err == nil && u.Procs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the group never had its 2 processes: %+v, %v", u, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if u.RSS <= 0 || u.PSS <= 0 || u.PSS > u.RSS || u.FDs < 6 || u.CPU.User+u.CPU.Sys <= 0 {
		t.Errorf("usage %+v", u)
	}
	cpu, err := GroupCPU(pgid)
	if err != nil || cpu.User < u.CPU.User || cpu.Sys < u.CPU.Sys {
		t.Errorf("GroupCPU %+v, %v; GroupUsage's %+v", cpu, err, u.CPU)
	}
	self, err := SelfUsage()
	if err != nil || self.Procs != 1 || self.RSS <= 0 || self.FDs <= 0 {
		t.Errorf("SelfUsage %+v, %v", self, err)
	}
	if _, err := GroupUsage(os.Getpid() + 1<<22); err == nil {
		t.Error("GroupUsage of no group: no error")
	}
	if _, err := GroupCPU(0); err == nil {
		t.Error("GroupCPU(0): no error")
	}
}

// TestRemoveStaleProfiles removes old profiles that no process uses, and
// keeps a recent one, one a live process names, and other directories.
func TestRemoveStaleProfiles(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-time.Hour)
	mk := func(name string, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "prefs.js"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale1, stale2 := mk("qb-chromium-1", old), mk("qb-firefox-2", old)
	fresh, other := mk("qb-firefox-3", time.Now()), mk("other-4", old)
	used := mk("qb-chromium-5", old)
	cmd := exec.Command("sh", "-c", "sleep 30; true", "sh", "--user-data-dir="+used)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	removed, err := RemoveStaleProfiles(dir, 10*time.Minute, ProfilePrefix, "qb-firefox-")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if !slices.Equal(removed, []string{stale1, stale2}) {
		t.Errorf("removed %v, want %v", removed, []string{stale1, stale2})
	}
	for _, p := range []string{fresh, other, used} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
