package browser

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// procInfo is what reap needs to know about one process.
type procInfo struct {
	pid   int
	state byte // 'R', 'S', 'Z'...
	ppid  int
	pgrp  int
}

// readStat parses /proc/<pid>/stat.
func readStat(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	// "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return procInfo{}, false
	}
	f := bytes.Fields(b[i+2:])
	if len(f) < 3 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, state: f[0][0], ppid: ppid, pgrp: pgrp}, true
}

// usesProfile reports whether the command line of pid names the profile dir.
func usesProfile(pid int, dir string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	want := "--user-data-dir=" + dir
	for arg := range bytes.SplitSeq(b, []byte{0}) {
		if string(arg) == want {
			return true
		}
	}
	return false
}

// browserProcesses lists the live (non-zombie) processes that belong to a
// browser: members of process group pgid (when not 0) or processes whose
// command line names the profile dir (when not "").
func browserProcesses(dir string, pgid int) []int {
	self := os.Getpid()
	var pids []int
	for _, st := range processes() {
		if st.pid == self || st.state == 'Z' || st.state == 'X' {
			continue
		}
		if (pgid != 0 && st.pgrp == pgid) || (dir != "" && usesProfile(st.pid, dir)) {
			pids = append(pids, st.pid)
		}
	}
	return pids
}

// processes lists the processes in /proc that could be read.
func processes() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var ps []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			ps = append(ps, st)
		}
	}
	return ps
}

// reap kills every process of the browser with SIGKILL and waits until
// none is left (zombies waiting for their reaper count as gone). Chromium
// children can fork while their parent dies, so it only stops after a few
// passes in a row find nothing.
func reap(dir string, pgid int, limit time.Duration) error {
	const quietPasses = 3
	deadline := time.Now().Add(limit)
	var left []int
	for quiet := 0; quiet < quietPasses; {
		left = browserProcesses(dir, pgid)
		if len(left) == 0 {
			quiet++
		} else {
			quiet = 0
			for _, pid := range left {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if time.Now().After(deadline) {
			if len(left) > 0 {
				return fmt.Errorf("browser: processes %v of profile %s still alive after %v", left, dir, limit)
			}
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// reapOrphans waits for the zombies among this process's children that
// belonged to process group pgid, and returns how many it reaped. They are
// Chromium's own children (renderers, GPU and network processes) orphaned
// when the group was killed before their parent could wait for them: in a
// child subreaper (PR_SET_CHILD_SUBREAPER, which the run's client agent
// sets) they are re-parented here rather than to init, and waiting for them
// adds their CPU time to this process's RUSAGE_CHILDREN, which is how the
// agent charges the browser's CPU to the sample. Call it only once the
// group's processes are gone and Chromium's main process has been waited
// for: it reaps nothing else.
func reapOrphans(pgid int) int {
	if pgid <= 0 {
		return 0
	}
	self := os.Getpid()
	n := 0
	for _, st := range processes() {
		if st.ppid != self || st.pgrp != pgid || st.state != 'Z' {
			continue
		}
		var ws syscall.WaitStatus
		if got, err := syscall.Wait4(st.pid, &ws, syscall.WNOHANG, nil); err == nil && got == st.pid {
			n++
		}
	}
	return n
}
