// Package safefs keeps quicbench's mounts and scratch directories from
// touching the host's files: OwnMountNamespace tells whether a process may
// mount without the host seeing it, and RemoveAll removes a scratch
// directory without ever following a mount point out of it. A contract stack's root (package
// peers/contract) is a tmpfs holding bind mounts of the host's top-level
// directories; it lives in a mount namespace of its own, but should one
// of its mounts ever be visible where the directory is removed,
// os.RemoveAll would descend through the bind mounts and delete the
// host's files. RemoveAll here detaches every mount under the directory
// first, and refuses to remove anything while one remains.
package safefs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// mountinfo is read by MountsUnder; tests replace it.
var mountinfo = "/proc/self/mountinfo"

// MountsUnder lists the mount points of this process's mount namespace at
// or below dir (an absolute, clean path), deepest first.
func MountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		// "36 35 98:0 /mnt1 /mnt/parent rw,... - ext3 /dev/root rw": field 5
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		at := unescape(fields[4])
		if at == dir || strings.HasPrefix(at, dir+"/") {
			out = append(out, at)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(out), nil
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ErrMounted is returned when a directory still holds a mount point that
// could not be detached: nothing was removed.
var ErrMounted = errors.New("safefs: a mount point remains below the directory; nothing removed")

// RemoveAll removes dir and everything below it, as os.RemoveAll does,
// after detaching (lazily, MNT_DETACH) every mount at or below it; when a
// mount cannot be detached it removes nothing and returns an error
// wrapping ErrMounted.
func RemoveAll(dir string) error {
	if dir == "" {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	mounts, err := MountsUnder(abs)
	if err != nil {
		return fmt.Errorf("safefs: reading the mount table before removing %s: %w", abs, err)
	}
	for _, m := range mounts {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %s: %v", ErrMounted, m, err)
		}
	}
	if left, err := MountsUnder(abs); err != nil {
		return fmt.Errorf("safefs: reading the mount table before removing %s: %w", abs, err)
	} else if len(left) > 0 {
		return fmt.Errorf("%w: %s", ErrMounted, strings.Join(left, ", "))
	}
	return os.RemoveAll(abs)
}

// OwnMountNamespace reports whether this process has a mount namespace of
// its own: not its parent's, not init's (a namespace that cannot be seen,
// as init's from a sandbox or an exited parent's, is not compared).
func OwnMountNamespace() (bool, error) {
	self, err := mountNSIno("self")
	if err != nil {
		return false, err
	}
	for _, other := range []string{strconv.Itoa(os.Getppid()), "1"} {
		o, err := mountNSIno(other)
		if err != nil {
			continue
		}
		if o == self {
			return false, nil
		}
	}
	return true, nil
}

func mountNSIno(pid string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+pid+"/ns/mnt", &st); err != nil {
		return 0, fmt.Errorf("safefs: mount namespace of %s: %w", pid, err)
	}
	return st.Ino, nil
}
