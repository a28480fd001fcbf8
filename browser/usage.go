package browser

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ,
// 100 on every Linux that quicbench runs on).
const clockTick = 10 * time.Millisecond

// Usage is what a set of processes uses at one moment: a browser's
// process group (GroupUsage) or one process (ProcessUsage).
type Usage struct {
	Procs int   // processes counted (zombies included in CPU only)
	RSS   int64 // resident memory in bytes, summed over the processes (shared pages in each)
	PSS   int64 // proportional set size in bytes, summed: shared pages divided among their users, so the sum is what the processes hold together
	FDs   int   // open file descriptors, summed
	// CPU is the user and system time of the processes, plus that of
	// their children that they waited for (so that a renderer reaped by
	// Chromium's zygote still counts), in steps of 10 ms per process.
	CPU CPUTime
}

// CPUTime is user and system CPU time.
type CPUTime struct{ User, Sys time.Duration }

// Add returns c + o.
func (c CPUTime) Add(o CPUTime) CPUTime { return CPUTime{c.User + o.User, c.Sys + o.Sys} }

// Sub returns c - o.
func (c CPUTime) Sub(o CPUTime) CPUTime { return CPUTime{c.User - o.User, c.Sys - o.Sys} }

// GroupUsage reads the usage of every process of process group pgid from
// /proc. Zombies count in CPU only. An error means no process of the
// group could be read.
func GroupUsage(pgid int) (Usage, error) {
	var u Usage
	if pgid <= 0 {
		return u, fmt.Errorf("browser: no process group")
	}
	found := false
	for _, st := range processes() {
		if st.pgrp != pgid {
			continue
		}
		pu, err := ProcessUsage(st.pid)
		if err != nil {
			continue // ended meanwhile
		}
		found = true
		u.add(pu)
	}
	if !found {
		return u, fmt.Errorf("browser: no process of group %d", pgid)
	}
	return u, nil
}

// GroupCPU is the CPU of GroupUsage alone (it reads no memory figures,
// which cost a walk of each process's page tables).
func GroupCPU(pgid int) (CPUTime, error) {
	if pgid <= 0 {
		return CPUTime{}, fmt.Errorf("browser: no process group")
	}
	var total CPUTime
	found := false
	for _, st := range processes() {
		if st.pgrp != pgid {
			continue
		}
		if cpu, _, err := statCPU("/proc/" + strconv.Itoa(st.pid)); err == nil {
			total = total.Add(cpu)
			found = true
		}
	}
	if !found {
		return CPUTime{}, fmt.Errorf("browser: no process of group %d", pgid)
	}
	return total, nil
}

func (u *Usage) add(o Usage) {
	u.Procs += o.Procs
	u.RSS += o.RSS
	u.PSS += o.PSS
	u.FDs += o.FDs
	u.CPU = u.CPU.Add(o.CPU)
}

// ProcessUsage reads the usage of process pid from /proc (a zombie has
// CPU time only).
func ProcessUsage(pid int) (Usage, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	cpu, state, err := statCPU(dir)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{Procs: 1, CPU: cpu}
	if state == 'Z' || state == 'X' {
		return u, nil
	}
	u.RSS, u.PSS = memoryOf(dir)
	if fds, err := os.ReadDir(dir + "/fd"); err == nil {
		u.FDs = len(fds)
	}
	return u, nil
}

// statCPU reads the state and the CPU time (utime, stime, cutime and
// cstime) of the process whose /proc directory is dir.
func statCPU(dir string) (CPUTime, byte, error) {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return CPUTime{}, 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return CPUTime{}, 0, fmt.Errorf("browser: %s/stat: malformed", dir)
	}
	// After "pid (comm) ": state(3) ppid pgrp session tty tpgid flags
	// minflt cminflt majflt cmajflt utime(14) stime cutime cstime(17).
	f := bytes.Fields(b[i+2:])
	if len(f) < 15 {
		return CPUTime{}, 0, fmt.Errorf("browser: %s/stat: %d fields", dir, len(f))
	}
	var ticks [4]int64
	for j, k := range []int{11, 12, 13, 14} {
		n, err := strconv.ParseInt(string(f[k]), 10, 64)
		if err != nil {
			return CPUTime{}, 0, fmt.Errorf("browser: %s/stat: field %d: %v", dir, k+3, err)
		}
		ticks[j] = n
	}
	return CPUTime{User: time.Duration(ticks[0]+ticks[2]) * clockTick, Sys: time.Duration(ticks[1]+ticks[3]) * clockTick}, f[0][0], nil
}

// memoryOf reads the Rss and Pss lines of dir/smaps_rollup (kB), 0 when
// they cannot be read.
func memoryOf(dir string) (rss, pss int64) {
	f, err := os.Open(dir + "/smaps_rollup")
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Bytes()
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("Rss:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("Pss:")):
			dst = &pss
		default:
			continue
		}
		fs := bytes.Fields(line)
		if len(fs) >= 2 {
			if kb, err := strconv.ParseInt(string(fs[1]), 10, 64); err == nil {
				*dst = kb << 10
			}
		}
	}
	return rss, pss
}

// RemoveStaleProfiles removes the browser profiles (the directories whose
// names start with one of prefixes: ProfilePrefix for Chromium's) in
// parent that no live process names on its command line and that were last modified more than olderThan ago: the
// profiles of browsers killed with their client agent (a SIGKILL leaves
// no one to remove them). The age keeps a profile that is being made,
// before its browser starts, from being taken for a stale one. It returns
// the directories removed.
func RemoveStaleProfiles(parent string, olderThan time.Duration, prefixes ...string) ([]string, error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, err
	}
	var cands []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !slices.ContainsFunc(prefixes, func(p string) bool { return p != "" && strings.HasPrefix(name, p) }) {
			continue
		}
		if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < olderThan {
			continue
		}
		cands = append(cands, filepath.Join(parent, name))
	}
	if len(cands) == 0 {
		return nil, nil
	}
	inUse := map[string]bool{}
	for _, st := range processes() {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(st.pid) + "/cmdline")
		if err != nil {
			continue
		}
		for _, d := range cands {
			if bytes.Contains(b, []byte(d)) {
				inUse[d] = true
			}
		}
	}
	var removed []string
	var errs []error
	for _, d := range cands {
		if inUse[d] {
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, d)
	}
	return removed, errors.Join(errs...)
}
