package store

import (
	"bufio"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
)

const lockChildEnv = "QB_STORE_LOCK_CHILD"

// TestOneWriter checks that a second writer is refused at once, naming the
// holder, while readers keep reading and learn that a writer is at work;
// and that Close releases the lock and removes its file.
func TestOneWriter(t *testing.T) {
	db, path := openTemp(t)
	mustCreateRun(t, db)
	for name, open := range map[string]func(string) (*DB, error){"Open": Open, "OpenExisting": OpenExisting} {
		_, err := open(path)
		var le *LockedError
		if !errors.As(err, &le) || !errors.Is(err, ErrLocked) {
			t.Fatalf("%s of a database being written: %v, want a LockedError", name, err)
		}
		host, _ := os.Hostname()
		if le.Holder.PID != os.Getpid() || le.Holder.Host != host || le.Holder.Since.IsZero() {
			t.Fatalf("%s: holder %+v, want pid %d on %s", name, le.Holder, os.Getpid(), host)
		}
		if msg := err.Error(); !strings.Contains(msg, "pid ") || !strings.Contains(msg, "--resume") {
			t.Fatalf("%s: message %q does not say who holds the database and what to do", name, msg)
		}
	}
	r, err := OpenReadOnly(path)
	if err != nil {
		t.Fatalf("a reader while a writer works: %v", err)
	}
	if _, err := r.LatestRun(ctx); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if h, busy, err := Writer(path); err != nil || !busy || h.PID != os.Getpid() {
		t.Fatalf("Writer during a write: %+v %v %v", h, busy, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file after Close: %v", err)
	}
	if _, busy, err := Writer(path); err != nil || busy {
		t.Fatalf("Writer after Close: busy %v, %v", busy, err)
	}
	db2, err := OpenExisting(path)
	if err != nil {
		t.Fatalf("reopening after Close: %v", err)
	}
	db2.Close()
	// A missing database is not created, and leaves no lock file.
	missing := filepath.Join(t.TempDir(), "none.db")
	if _, err := OpenExisting(missing); err == nil {
		t.Fatal("OpenExisting created a missing database")
	}
	if _, err := os.Stat(missing + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file of a missing database: %v", err)
	}
}

// TestLockDiesWithProcess checks that the kernel releases the lock of a
// writer killed by SIGKILL: the stale lock file is no obstacle.
func TestLockDiesWithProcess(t *testing.T) {
	if path := os.Getenv(lockChildEnv); path != "" {
		db, err := OpenExisting(path)
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(3)
		}
		_ = db
		os.Stdout.WriteString("locked\n")
		select {}
	}
	db, path := openTemp(t)
	mustCreateRun(t, db)
	db.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockDiesWithProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "locked" {
	}
	_, err = OpenExisting(path)
	var le *LockedError
	if !errors.As(err, &le) || le.Holder.PID != cmd.Process.Pid {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("open while the child writes: %v, want refused naming pid %d", err, cmd.Process.Pid)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if _, err := os.Stat(path + ".lock"); err != nil {
		t.Fatalf("the killed writer's lock file should remain (stale): %v", err)
	}
	if _, busy, err := Writer(path); err != nil || busy {
		t.Fatalf("Writer after the holder died: busy %v, %v", busy, err)
	}
	db2, err := OpenExisting(path)
	if err != nil {
		t.Fatalf("open after the holder was killed: %v", err)
	}
	db2.Close()
}

// TestCorruptionRefused damages a closed database two ways (random bytes
// over its last page; its last half page cut off) and checks that every
// open refuses it with ErrCorrupt.
func TestCorruptionRefused(t *testing.T) {
	for _, how := range []string{"garbage", "truncate"} {
		t.Run(how, func(t *testing.T) {
			db, path := openTemp(t)
			run := mustCreateRun(t, db)
			cells := testCells(3)
			if err := db.InsertCells(ctx, run.ID, cells); err != nil {
				t.Fatal(err)
			}
			for it := range 8 {
				for _, c := range cells {
					s := fullSample(c.ID, it, 200)
					if err := db.InsertSample(ctx, &s); err != nil {
						t.Fatal(err)
					}
				}
			}
			db.Close()
			if err := corruptLastPage(path, how == "truncate", rand.New(rand.NewPCG(1, 2))); err != nil {
				t.Fatal(err)
			}
			for name, open := range map[string]func(string) (*DB, error){"Open": Open, "OpenExisting": OpenExisting, "OpenReadOnly": OpenReadOnly} {
				d, err := open(path)
				if err == nil {
					d.Close()
					t.Fatalf("%s opened a damaged database", name)
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "damaged") {
					t.Fatalf("%s: %v, want ErrCorrupt", name, err)
				}
			}
		})
	}
}

// TestDiskFull fills a small tmpfs with samples: the failing write says
// the disk is full, every sample stored before it is kept intact, and once
// the filesystem grows the database takes samples again.
func TestDiskFull(t *testing.T) {
	testsupport.RequireRoot(t, "needs root to mount a small tmpfs")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k", "qbtest", dir).CombinedOutput(); err != nil {
		testsupport.Unavailable(t, "mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	path := filepath.Join(dir, "full.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	run := mustCreateRun(t, db)
	cells := testCells(3)
	if err := db.InsertCells(ctx, run.ID, cells); err != nil {
		t.Fatal(err)
	}
	stored := 0
	var full error
	for it := 0; it < 1000 && full == nil; it++ {
		for _, c := range cells {
			s := fullSample(c.ID, it, 300)
			if err := db.InsertSample(ctx, &s); err != nil {
				full = err
				break
			}
			stored++
		}
	}
	if !errors.Is(full, ErrDiskFull) || !strings.Contains(full.Error(), "--resume") {
		t.Fatalf("after %d samples: %v, want ErrDiskFull", stored, full)
	}
	if err := db.Close(); err != nil && !errors.Is(err, ErrDiskFull) {
		t.Logf("close on a full disk: %v", err)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=16m", dir).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v %s", err, out)
	}
	db, err = OpenExisting(path)
	if err != nil {
		t.Fatalf("reopening once space is back: %v", err)
	}
	defer db.Close()
	if err := db.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	n, err := db.SampleCount(ctx, run.ID)
	if err != nil || n != stored {
		t.Fatalf("%d samples after the disk filled (%v), want the %d stored", n, err, stored)
	}
	s := fullSample(cells[0].ID, 5000, 300)
	if err := db.InsertSample(ctx, &s); err != nil {
		t.Fatalf("a sample once space is back: %v", err)
	}
}

// corruptLastPage damages the database file at path: random bytes over its
// last page, or (truncate) its last half page cut off.
func corruptLastPage(path string, truncate bool, rng *rand.Rand) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	const page = 4096 // the page size quicbench's databases use
	if truncate {
		return os.Truncate(path, st.Size()-page/2)
	}
	b := make([]byte, page)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, st.Size()-page); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
