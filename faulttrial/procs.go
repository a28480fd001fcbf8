package faulttrial

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// markerEnv is set, to a value unique to the trial, in the environment of
// every quicbench process a trial starts; their children (server, agent,
// Chromium) inherit it, so the trial finds its own processes among those
// of everyone else on the machine, even once a killed runner's children
// have been reparented.
const markerEnv = "QUICBENCH_FAULT_TRIAL"

// process is a live process of a trial.
type process struct {
	pid  int
	args []string
}

// marked lists the live (not zombie) processes whose environment holds
// markerEnv=id.
func marked(id string) []process {
	want := []byte(markerEnv + "=" + id + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue // a zombie: dead, waiting to be reaped
			}
		}
		cl, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, process{pid: pid, args: strings.Split(strings.TrimRight(string(cl), "\x00"), "\x00")})
	}
	return out
}

// find returns the first marked process that match accepts.
func find(id string, match func(process) bool) (process, bool) {
	for _, p := range marked(id) {
		if match(p) {
			return p, true
		}
	}
	return process{}, false
}

// subcommand matches a quicbench process running subcommand (serve, agent).
func subcommand(name string) func(process) bool {
	return func(p process) bool { return len(p.args) > 1 && p.args[1] == name }
}

// netnsInode is the inode of a process's network namespace (0 if gone).
func netnsInode(pid int) uint64 {
	var st syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st); err != nil {
		return 0
	}
	return st.Ino
}

// namespaces records the network namespaces (other than the host's) that
// the trial's processes are in.
func namespaces(id string, seen map[uint64]bool) {
	host := netnsInode(os.Getpid())
	for _, p := range marked(id) {
		if ino := netnsInode(p.pid); ino != 0 && ino != host {
			seen[ino] = true
		}
	}
}

// liveNamespaces returns those of the namespaces that still exist: some
// process is in one, or it is bind-mounted under /run/netns.
func liveNamespaces(seen map[uint64]bool) []uint64 {
	live := map[uint64]bool{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ino := netnsInode(pid); seen[ino] {
			live[ino] = true
		}
	}
	mounts, _ := os.ReadDir("/run/netns")
	for _, m := range mounts {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/run/netns", m.Name()), &st) == nil && seen[st.Ino] {
			live[st.Ino] = true
		}
	}
	var out []uint64
	for ino := range live {
		out = append(out, ino)
	}
	slices.Sort(out)
	return out
}

// leftovers waits up to wait for the trial's processes and namespaces to
// be gone (a killed parent's children die by their parent-death signal
// moments later) and describes what remains: processes, network
// namespaces (with the TUN devices in them), TUN devices of the host's
// namespace, and a held database lock.
func leftovers(id string, ns map[uint64]bool, db string, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		var out []string
		for _, p := range marked(id) {
			out = append(out, fmt.Sprintf("process %d (%s)", p.pid, strings.Join(p.args, " ")))
		}
		for _, ino := range liveNamespaces(ns) {
			out = append(out, fmt.Sprintf("network namespace %d", ino))
		}
		if m, _ := filepath.Glob("/sys/class/net/qbtun*"); len(m) > 0 {
			out = append(out, "TUN device in the host's namespace: "+strings.Join(m, ", "))
		}
		if h, busy, err := writerOf(db); err != nil || busy {
			out = append(out, fmt.Sprintf("database lock held by %s (%v)", h, err))
		}
		if len(out) == 0 || time.Now().After(deadline) {
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
}
