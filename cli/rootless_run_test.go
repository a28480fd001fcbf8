package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/store"
)

// rootlessPlan is the small plan TestRunRootless runs as nobody: two
// protocols, two tests, three iterations, on a delayed (and rate-limited,
// so that two testbeds may share the machine) link.
const rootlessPlan = `
name: rootless
seed: 5
iterations: 3
protocols: [h2, h3]
timeout: 20s
scenarios:
  - name: delayed
    link: "delay 10ms rate 20mbit"
tests:
  - test: ttfb
  - test: download
    params: {size: 200KB}
`

// nobodyUID is the uid (and gid) of user nobody, as which RunAsNobody runs.
const nobodyUID = 65534

// TestRunRootless runs `quicbench run` as an ordinary user (nobody) from a
// directory of its own, with the plan file and the database given
// relative to it: a run stopped after 5 samples, then resumed on 2
// testbeds at once. The database must be complete, every sample valid,
// the files owned by nobody and the rootless note stored. It fails, not
// skips, where the machine allows unprivileged user namespaces.
func TestRunRootless(t *testing.T) {
	requireRootCLI(t)
	dir := testsupport.NobodyDir(t, "qbrunrootless")
	if err := os.Chown(dir, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rootless.yaml"), []byte(rootlessPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := netns.UserNamespaceSupport(); err != nil && strings.Contains(err.Error(), testsupport.TUNPath) {
		// The host keeps nobody out of /dev/net/tun: without the private
		// node rootless mode is impossible, and run must say why.
		out, err := testsupport.RunAsNobody(dir, []string{cliExecEnv + "=main"}, "run", "--plan", "rootless.yaml", "--quiet")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitEnv || !strings.Contains(out, testsupport.TUNPath) || !strings.Contains(out, "hint:") {
			t.Fatalf("run as nobody without a usable TUN device: %v, want exit status %d saying why, with a hint\n%s", err, ExitEnv, out)
		}
	}
	out, err := rootlessAsNobody(t, dir, "run", "--plan", "rootless.yaml", "--lines", "--no-report", "--max-samples", "5")
	if err != nil {
		t.Fatalf("run as nobody, 5 samples: %v\n%s", err, out)
	}
	out, err = rootlessAsNobody(t, dir, "run", "--resume", "rootless.db", "--lines", "--parallel", "2")
	if err != nil {
		t.Fatalf("run --resume as nobody on 2 testbeds: %v\n%s", err, out)
	}
	for _, f := range []string{"rootless.db", "rootless.html"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != nobodyUID || sys.Gid != nobodyUID {
			t.Errorf("%s is owned by %d:%d, want nobody (%d:%d)", f, sys.Uid, sys.Gid, nobodyUID, nobodyUID)
		}
	}
	checkRootlessRun(t, filepath.Join(dir, "rootless.db"), out)
}

// checkRootlessRun checks the database of TestRunRootless: complete, every
// sample valid, the namespaces' sysctls recorded, the rootless note
// stored, and the resumed part taken on two testbeds.
func checkRootlessRun(t *testing.T, path, out string) {
	t.Helper()
	db, err := store.OpenExisting(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	run, err := db.LatestRun(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := db.LoadDataset(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := plan.Count(ds.Cells).Total(); ds.Run.Status != "complete" || len(ds.Samples) != want || want != 16 {
		t.Fatalf("run %s with %d samples, want complete with %d (16: 4 cells, 3 iterations and a warm-up)\n%s", ds.Run.Status, len(ds.Samples), want, out)
	}
	slots := map[int]bool{}
	for _, s := range ds.Samples {
		if s.Status != model.StatusOK {
			t.Errorf("sample of cell %d #%d: %s %s", s.CellID, s.Iteration, s.Status, s.Error)
		}
		slots[s.Slot] = true
	}
	if len(ds.Run.Env.Sysctls) == 0 || ds.Run.Env.CCClient == "" {
		t.Errorf("the testbed's environment was not recorded: %+v", ds.Run.Env)
	}
	warns, err := db.RunWarnings(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, w := range warns {
		if strings.HasPrefix(w, rootlessNote) {
			notes = append(notes, w)
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "uid 65534") {
		t.Errorf("rootless notes %q, want one naming uid 65534; run warnings: %q", notes, warns)
	}
	if n, err := db.RunParallel(ctx, run.ID); err != nil || n != 2 {
		t.Errorf("stored parallelism %d, %v; want 2", n, err)
	}
	if !slots[1] {
		t.Logf("the resumed part ran on testbeds %v only (the admission rule kept it to one)", slots)
	}
}

// TestRootlessRunNote checks the run warning of a rootless invocation.
func TestRootlessRunNote(t *testing.T) {
	n := rootlessRunNote(0, []string{"no SCHED_FIFO"})
	if !strings.HasPrefix(n, rootlessNote) || !strings.HasSuffix(n, "; no SCHED_FIFO") || strings.Contains(n, "first") {
		t.Errorf("note %q", n)
	}
	n = rootlessRunNote(7, nil)
	if !strings.Contains(n, "after the first 7 stored") || !strings.Contains(n, "no difference from root mode") {
		t.Errorf("note of a resumed run %q", n)
	}
}

// TestRecordMode checks which privilege notes a run gets, each once.
func TestRecordMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec := model.Run{PlanName: "p", PlanText: "name: p", PlanHash: "h", Status: "running"}
	if err := db.CreateRun(ctx, &rec); err != nil {
		t.Fatal(err)
	}
	db.Close()
	warnings := func() []string {
		db, err := store.OpenExisting(path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		w, err := db.RunWarnings(ctx, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	sum := &runner.Summary{RunID: rec.ID, Taken: 3}
	if err := recordMode(ctx, path, sum, false); err != nil || len(warnings()) != 0 {
		t.Fatalf("a root run got notes %q, %v", warnings(), err)
	}
	for range 2 {
		if err := recordMode(ctx, path, sum, true); err != nil {
			t.Fatal(err)
		}
	}
	if w := warnings(); len(w) != 1 || !strings.HasPrefix(w[0], rootlessNote) {
		t.Fatalf("after two rootless invocations: %q, want one rootless note", w)
	}
	for range 2 {
		if err := recordMode(ctx, path, sum, false); err != nil {
			t.Fatal(err)
		}
	}
	if w := warnings(); len(w) != 2 || !strings.HasPrefix(w[1], "mixed privileges:") {
		t.Fatalf("after two root resumptions: %q, want the rootless and the mixed note", w)
	}
}
