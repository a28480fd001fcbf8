package cli

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/store"
)

// TestSecondWriterRefused holds a database's write lock, as a running
// quicbench run does, and checks that quicbench run --resume is refused at
// once naming the holder, while report and export work and say that the
// run is in progress; once the lock is gone, they say it is resumable.
func TestSecondWriterRefused(t *testing.T) {
	path := reportDB(t)
	db, err := store.OpenExisting(path) // the "running" writer
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "run", "--resume", path, "--quiet", "--no-report")
	if code == 0 || !strings.Contains(stderr, "being written by another quicbench") || !strings.Contains(stderr, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second writer: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "report", path, "--text")
	if code != 0 || !strings.Contains(stderr, "is in progress") || !strings.Contains(stderr, "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("report during a run: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "export", path, "-o", filepath.Join(t.TempDir(), "x"))
	if code != 0 || !strings.Contains(stderr, "is in progress") {
		t.Fatalf("export during a run: exit %d, stderr %q", code, stderr)
	}
	db.Close()
	code, _, stderr = runCLI(t, "report", path, "--text")
	if code != 0 || strings.Contains(stderr, "in progress") {
		t.Fatalf("report after the run: exit %d, stderr %q", code, stderr)
	}
}

// TestDamagedDatabaseRefused checks that report, export and run --resume
// refuse a database whose last page is damaged, saying so.
func TestDamagedDatabaseRefused(t *testing.T) {
	path := reportDB(t)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4096)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, st.Size()-4096); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, args := range [][]string{
		{"report", path, "--text"},
		{"export", path, "-o", filepath.Join(t.TempDir(), "x")},
		{"run", "--resume", path, "--quiet", "--no-report"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != ExitFailure || !strings.Contains(stderr, "damaged") || stdout != "" {
			t.Errorf("%s of a damaged database: exit %d, stdout %q, stderr %q", args[0], code, stdout, stderr)
		}
	}
}
