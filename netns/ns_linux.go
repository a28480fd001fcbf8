package netns

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The process's own network namespace, to return to after visiting another.
var hostNS struct {
	once sync.Once
	fd   int
	err  error
}

func hostNetNS() (int, error) {
	hostNS.once.Do(func() {
		// /proc/self is the thread group leader, which quicbench never moves.
		hostNS.fd, hostNS.err = unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if hostNS.err != nil {
			hostNS.err = fmt.Errorf("open /proc/self/ns/net: %w", hostNS.err)
		}
	})
	return hostNS.fd, hostNS.err
}

// onLockedThread runs fn on a fresh goroutine locked to its OS thread, and
// waits for it. fn returns whether the thread is still clean (in the host
// namespace, default attributes); a dirty thread is not unlocked, so the Go
// runtime terminates it when the goroutine exits instead of reusing it.
// A panic in fn is re-raised in the caller.
func onLockedThread(fn func() (clean bool, err error)) error {
	type result struct {
		err error
		p   any
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		clean := false
		defer func() {
			p := recover()
			if clean {
				runtime.UnlockOSThread()
			}
			if p != nil {
				done <- result{p: p}
			}
		}()
		var err error
		clean, err = fn()
		done <- result{err: err}
	}()
	r := <-done
	if r.p != nil {
		panic(r.p)
	}
	return r.err
}

// InNamespace runs fn on a locked OS thread that has entered the network
// namespace nsfd (a file descriptor of it), then returns the thread to the
// process's own namespace. A thread that cannot return is discarded, and a
// panic in fn reaches the caller.
func InNamespace(nsfd int, fn func() error) error {
	host, err := hostNetNS()
	if err != nil {
		return err
	}
	return onLockedThread(func() (bool, error) {
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			return true, fmt.Errorf("setns: %w", err)
		}
		// If fn panics, the thread stays in nsfd and is discarded (see
		// onLockedThread), and the panic reaches the caller.
		ferr := fn()
		if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
			return false, errors.Join(ferr, fmt.Errorf("returning to the host namespace: %w", err))
		}
		return true, ferr
	})
}

// childEhashEntries is the size of the TCP socket hash table that each
// namespace NewNamespace creates gets of its own, instead of sharing the
// host's (net.ipv4.tcp_child_ehash_entries, Linux >= 6.1). Listing a
// namespace's TCP sockets (sock_diag, which the runner does during every
// sample) walks the whole table: 0.37 ms for a host's 262,144 buckets,
// microseconds for these.
const childEhashEntries = 16384

// Sysctls the kernel derives from a namespace's hash table size when the
// namespace gets a table of its own; NewNamespace sets them back to the
// host's values so that only the table's size differs.
var ehashDerived = []string{"net.ipv4.tcp_max_tw_buckets", "net.ipv4.tcp_max_syn_backlog"}

// NewNamespace creates an anonymous network namespace and returns a file
// holding it. The namespace lives as long as that file (or a bind mount,
// or a process in it, or a socket or TUN device opened in it) exists.
//
// Where the kernel allows, the namespace has a TCP socket hash table of its
// own (childEhashEntries): it is created from inside a short-lived
// intermediate namespace whose net.ipv4.tcp_child_ehash_entries asks for
// one, so the host's setting is never touched. Elsewhere it shares the
// host's table, as namespaces do by default.
func NewNamespace() (*os.File, error) {
	host, err := hostNetNS()
	if err != nil {
		return nil, err
	}
	var f *os.File
	err = onLockedThread(func() (bool, error) {
		hostVals := map[string]string{}
		for _, k := range ehashDerived {
			if v, err := readSysctl(k); err == nil {
				hostVals[k] = v
			}
		}
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return true, fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
		}
		// This thread is now in the intermediate namespace: a namespace it
		// creates gets its own table if the sysctl takes.
		_, herr := writeSysctl("net.ipv4.tcp_child_ehash_entries", strconv.Itoa(childEhashEntries))
		if herr == nil {
			if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
				err = fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
				if serr := unix.Setns(host, unix.CLONE_NEWNET); serr != nil {
					return false, errors.Join(err, fmt.Errorf("returning to the host namespace: %w", serr))
				}
				return true, err
			}
			for k, v := range hostVals {
				if _, err := writeSysctl(k, v); err != nil {
					if serr := unix.Setns(host, unix.CLONE_NEWNET); serr != nil {
						return false, errors.Join(err, fmt.Errorf("returning to the host namespace: %w", serr))
					}
					return true, err
				}
			}
		}
		fd, oerr := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if oerr == nil {
			f = os.NewFile(uintptr(fd), "netns")
		} else {
			oerr = fmt.Errorf("open /proc/thread-self/ns/net: %w", oerr)
		}
		if err := unix.Setns(host, unix.CLONE_NEWNET); err != nil {
			return false, errors.Join(oerr, fmt.Errorf("returning to the host namespace: %w", err))
		}
		return true, oerr
	})
	if err != nil && f != nil {
		f.Close()
		f = nil
	}
	return f, err
}

// nsInode is the inode number identifying the namespace behind fd.
func nsInode(fd int) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// procNetNSInode reads the network namespace inode of process pid, or 0.
func procNetNSInode(pid int) uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &st); err != nil {
		return 0
	}
	return st.Ino
}

// pidsInNetNS lists the processes (other than this one) whose network
// namespace is one of inodes, or whose command line holds one of args
// (an nsenter on its way into a namespace).
func pidsInNetNS(inodes []uint64, args []string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if ino := procNetNSInode(pid); ino != 0 && slices.Contains(inodes, ino) {
			pids = append(pids, pid)
			continue
		}
		if len(args) == 0 {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a != "" && slices.Contains(args, a) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z' && s[i+2] != 'X'
}

// bindNetNS makes the namespace behind fd visible at /run/netns/name, the
// way `ip netns add` does, so that `ip netns exec` and other processes can
// enter it.
func bindNetNS(fd int, name string) (string, error) {
	const dir = "/run/netns"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Like iproute2: make /run/netns a shared mount so that the bind mounts
	// propagate to other mount namespaces.
	if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		if err != unix.EINVAL {
			return "", fmt.Errorf("make %s shared: %w", dir, err)
		}
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return "", fmt.Errorf("bind %s: %w", dir, err)
		}
		if err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
			return "", fmt.Errorf("make %s shared: %w", dir, err)
		}
	}
	path := dir + "/" + name
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("namespace %s already exists", name)
		}
		return "", err
	}
	f.Close()
	src := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(src, path, "none", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return "", fmt.Errorf("bind mount %s: %w", path, err)
	}
	return path, nil
}

// unbindNetNS removes a bind mount made by bindNetNS.
func unbindNetNS(path string) error {
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
