package store

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// One writer per database. Open and OpenExisting take an exclusive lock on
// a file beside the database (its path with ".lock" appended) and hold it
// until Close: a second writer, in this process or any other, is refused
// at once with who holds the lock. The lock is an open-file-description
// lock (fcntl F_OFD_SETLK) held by the kernel for the open file, so a
// process that dies, even by SIGKILL, releases it: a crash never leaves a
// stale lock. Readers (OpenReadOnly) never take it; Writer tells them
// whether a writer is at work. The lock file holds the holder's process
// id, host and start time, for the messages; Close removes it.

// ErrLocked is returned (wrapped, in a *LockedError) by Open and
// OpenExisting when another writer holds the database.
var ErrLocked = errors.New("database is being written by another process")

// Holder is the writer that holds a database's lock.
type Holder struct {
	PID   int
	Host  string
	Since time.Time
}

// String describes the holder for a message: "pid 123 on host h since
// 2026-01-02 15:04:05 UTC".
func (h Holder) String() string {
	if h.PID == 0 {
		return "a process that has not said who it is yet"
	}
	s := fmt.Sprintf("pid %d on host %s", h.PID, h.Host)
	if !h.Since.IsZero() {
		s += " since " + h.Since.UTC().Format("2006-01-02 15:04:05 MST")
	}
	return s
}

// LockedError is the error of a writer refused because another holds the
// database.
type LockedError struct {
	Path   string
	Holder Holder
}

func (e *LockedError) Error() string {
	return fmt.Sprintf("store: %s is being written by another quicbench (%s): one process writes a database at a time; wait for it to end, or stop it (kill %d on %s) and continue with quicbench run --resume %s",
		e.Path, e.Holder, e.Holder.PID, e.Holder.Host, e.Path)
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

// lockPath is the lock file of the database at abs.
func lockPath(abs string) string { return abs + ".lock" }

// writeLock is a held database lock.
type writeLock struct {
	f    *os.File
	path string
}

// acquireLock takes the write lock of the database at abs (shown as path
// in messages), without waiting.
func acquireLock(path, abs string) (*writeLock, error) {
	lp := lockPath(abs)
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(lp, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("store: %s: creating its lock file: %w", path, err)
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
		if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
			f.Close()
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) {
				h, _ := readHolder(lp)
				return nil, &LockedError{Path: path, Holder: h}
			}
			return nil, fmt.Errorf("store: %s: locking %s: %w", path, lp, err)
		}
		// The previous holder may have removed the file between our open
		// and our lock: then we locked a file nobody else will see. Lock
		// the file the path names now.
		fi, err1 := f.Stat()
		pi, err2 := os.Stat(lp)
		if err1 == nil && err2 == nil && os.SameFile(fi, pi) {
			host, _ := os.Hostname()
			info := fmt.Sprintf("%d %s %d\n", os.Getpid(), host, time.Now().UnixNano())
			if err := f.Truncate(0); err == nil {
				_, _ = f.WriteAt([]byte(info), 0)
			}
			return &writeLock{f: f, path: lp}, nil
		}
		f.Close()
		if attempt > 100 {
			return nil, fmt.Errorf("store: %s: its lock file %s keeps being replaced", path, lp)
		}
	}
}

// release removes the lock file and releases the lock (in this order, so
// that a writer waiting on the old file retries on a new one).
func (l *writeLock) release() error {
	if l == nil {
		return nil
	}
	err := os.Remove(l.path)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err2 := l.f.Close(); err == nil {
		err = err2
	}
	return err
}

// readHolder reads the holder recorded in a lock file.
func readHolder(lp string) (Holder, error) {
	b, err := os.ReadFile(lp)
	if err != nil {
		return Holder{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		return Holder{}, fmt.Errorf("lock file %s: unreadable holder %q", lp, b)
	}
	pid, err1 := strconv.Atoi(f[0])
	ns, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return Holder{}, fmt.Errorf("lock file %s: unreadable holder %q", lp, b)
	}
	return Holder{PID: pid, Host: f[1], Since: time.Unix(0, ns).UTC()}, nil
}

// Writer reports whether a process holds the write lock of the database at
// path (a run in progress) and, if so, who. It only tests the lock (fcntl
// F_OFD_GETLK): it never takes it, creates no file and writes nothing, so
// readers may call it while a run writes.
func Writer(path string) (Holder, bool, error) {
	abs, err := absPath(path)
	if err != nil {
		return Holder{}, false, err
	}
	lp := lockPath(abs)
	f, err := os.Open(lp)
	if errors.Is(err, os.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, fmt.Errorf("store: %s: %w", path, err)
	}
	defer f.Close()
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 0}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return Holder{}, false, fmt.Errorf("store: %s: testing the lock %s: %w", path, lp, err)
	}
	if lk.Type == unix.F_UNLCK {
		return Holder{}, false, nil // a file left by a writer that died
	}
	h, _ := readHolder(lp)
	return h, true, nil
}
