package runner_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quicbench/quicbench/cli"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/lighthouse"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/runner"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"

	_ "modernc.org/sqlite"
)

// The test binary doubles as the quicbench executable: the runner starts
// it as `serve` and `agent` inside the namespaces, and the kill test runs
// `run` in a child process.
const execEnv = "QUICBENCH_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		os.Exit(cli.Main(&cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:], Getenv: os.Getenv, Exe: os.Args[0]}))
	}
	os.Setenv(execEnv, "1") // for the children
	os.Exit(m.Run())
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		testsupport.Unavailable(t, "needs root for network namespaces")
	}
	if testing.Short() {
		t.Skip("integration test (slow); skipped with -short")
	}
}

const smallPlan = `
name: small
seed: 7
iterations: 4
warmup: true
protocols: [h2, h3]
timeout: 20s
scenarios:
  - name: clean
  - name: delayed
    link: "delay 5ms loss 1%"
tests:
  - test: ttfb
  - test: download
    params: {size: 200KB}
`

func runPlan(t *testing.T, p *plan.Plan, db string, max int) *runner.Summary {
	t.Helper()
	return runPlanParallel(t, p, db, max, 1)
}

// runPlanParallel runs p into db on up to parallel testbeds at once.
func runPlanParallel(t *testing.T, p *plan.Plan, db string, max, parallel int) *runner.Summary {
	t.Helper()
	exe, _ := os.Executable()
	var log strings.Builder
	sum, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: &log, Mode: runner.ProgressLines, MaxSamples: max, Parallel: parallel})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	return sum
}

func load(t *testing.T, db string) *model.Dataset {
	t.Helper()
	s, err := store.OpenExisting(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run, err := s.LatestRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ds, err := s.LoadDataset(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// checkComplete asserts exactly one sample per (cell, iteration) of the plan.
func checkComplete(t *testing.T, ds *model.Dataset) {
	t.Helper()
	want := plan.Count(ds.Cells).Total()
	if len(ds.Samples) != want {
		t.Fatalf("%d samples stored, want exactly %d", len(ds.Samples), want)
	}
	seen := map[string]bool{}
	for _, s := range ds.Samples {
		k := fmt.Sprintf("%d/%d", s.CellID, s.Iteration)
		if seen[k] {
			t.Fatalf("duplicate sample %s", k)
		}
		seen[k] = true
	}
	if ds.Run.Status != "complete" {
		t.Fatalf("run status %q, want complete", ds.Run.Status)
	}
}

func TestRunPairsAndResumes(t *testing.T) {
	needRoot(t)
	p, db := smallPlanAndDB(t, "r.db")
	// A partial run, then a resume of the same database.
	sum := runPlan(t, p, db, 9)
	if sum.Complete || sum.Taken != 9 {
		t.Fatalf("partial run: %+v", sum)
	}
	checkEnv(t, load(t, db).Run.Env)
	exe, _ := os.Executable()
	sum, err := runner.Run(context.Background(), runner.Options{DB: db, Resume: true, Exe: exe})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.Complete || sum.Resumed != 9 {
		t.Fatalf("resumed run: %+v", sum)
	}
	ds := load(t, db)
	checkComplete(t, ds)
	// The environment is stored, with the largest socket buffer limits the
	// run used: the delayed scenario needs more than the 16 MiB minimum.
	checkEnv(t, ds.Run.Env)
	for _, k := range []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"} {
		f := strings.Fields(ds.Run.Env.Sysctls[k])
		if len(f) != 3 {
			t.Fatalf("sysctl %s = %q", k, ds.Run.Env.Sysctls[k])
		}
		if n, err := strconv.Atoi(f[2]); err != nil || n <= 16<<20 {
			t.Errorf("sysctl %s = %q: the grown maximum of the delayed links is not recorded", k, ds.Run.Env.Sysctls[k])
		}
	}
	// Every protocol of an iteration of a group met the same seed, and the
	// negotiated protocol matches the cell's.
	cells := map[int64]model.Cell{}
	for _, c := range ds.Cells {
		cells[c.ID] = c
	}
	seeds := map[string]uint64{}
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		k := fmt.Sprintf("%s#%d", c.Group, s.Iteration)
		if prev, ok := seeds[k]; ok && prev != s.Seed {
			t.Errorf("%s: protocols met different seeds", k)
		}
		seeds[k] = s.Seed
		if s.Status != model.StatusOK {
			t.Errorf("sample %s #%d: %s %s", c.Key, s.Iteration, s.Status, s.Error)
			continue
		}
		if want := map[string]string{"h2": "h2", "h3": "h3"}[c.Protocol]; s.Negotiated.ALPN != want {
			t.Errorf("sample %s: negotiated %q", c.Key, s.Negotiated.ALPN)
		}
		if c.Scenario == "delayed" && s.LinkUp.PacketsIn == 0 {
			t.Errorf("sample %s: no link counters", c.Key)
		}
	}
	// Resuming a complete run is refused with a reason.
	if _, err := runner.Run(context.Background(), runner.Options{DB: db, Resume: true, Exe: exe}); err == nil || !strings.Contains(err.Error(), "already complete") {
		t.Fatalf("resume of a complete run: %v", err)
	}
}

// checkEnv asserts that the testbed's part of a stored environment is
// there: congestion controls and the sysctls with the buffer limits.
func checkEnv(t *testing.T, env model.Environment) {
	t.Helper()
	if !strings.HasPrefix(env.CCClient, "cubic") || !strings.HasPrefix(env.CCServer, "cubic") {
		t.Errorf("stored congestion control: client %q, server %q", env.CCClient, env.CCServer)
	}
	for _, k := range []string{"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control"} {
		if env.Sysctls[k] == "" {
			t.Errorf("stored sysctls lack %s: %v", k, env.Sysctls)
		}
	}
}

func TestSIGKILLThenResume(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	planFile := filepath.Join(dir, "small.yaml")
	if err := os.WriteFile(planFile, []byte(smallPlan), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "k.db")
	exe, _ := os.Executable()
	cmd := exec.Command(exe, "run", "--plan", planFile, "-o", db, "--quiet", "--no-report")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it half way: once at least 12 samples are stored.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if n := storedSamples(db); n >= 12 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the run did not store 12 samples within 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// Its server and agent died with it (parent-death signal): no process
	// of the test binary runs in a quicbench namespace any more.
	waitNoChildren(t, exe)
	out, err := exec.Command(exe, "run", "--resume", db, "--quiet", "--no-report").CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	checkComplete(t, load(t, db))
}

func storedSamples(db string) int {
	if _, err := os.Stat(db); err != nil {
		return 0
	}
	s, err := store.OpenReadOnly(db) // a reader: the run holds the write lock
	if err != nil {
		return 0
	}
	defer s.Close()
	run, err := s.LatestRun(context.Background())
	if err != nil {
		return 0
	}
	n, _ := s.SampleCount(context.Background(), run.ID)
	return n
}

// waitNoChildren waits until no process other than this one runs exe with
// the serve or agent subcommand.
func waitNoChildren(t *testing.T, exe string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil {
				continue
			}
			args := strings.Split(string(b), "\x00")
			if len(args) > 1 && strings.Contains(string(b), exe) && (strings.Contains(string(b), "\x00serve\x00") || strings.Contains(string(b), "\x00agent")) {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d server/agent processes outlived the killed run", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestQuickPlan runs the README's default plan whole: samples for every
// protocol and test, a complete run, and the time it took in the log.
func TestQuickPlan(t *testing.T) {
	needRoot(t)
	needChromium(t) // the page test runs in Chromium too
	p, err := plan.Builtin("quick")
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "quick.db")
	start := time.Now()
	sum := runPlan(t, p, db, 0)
	t.Logf("quick plan: %d samples in %s (%d failed, %d invalid)", sum.Taken, time.Since(start).Round(time.Second), sum.Failed, sum.Invalid)
	for _, o := range sum.Overheads {
		t.Logf("per-sample overhead, %s: total %s; link drain %s; preparation %s; runner's own %s", o.Client, o.Total, o.Drain, o.Prep, o.Own)
	}
	ds := load(t, db)
	checkComplete(t, ds)
	checkPrep(t, ds)
	ok := map[string]int{}
	for _, s := range ds.Samples {
		if s.Status == model.StatusOK && !s.Warmup {
			for _, c := range ds.Cells {
				if c.ID == s.CellID {
					ok[c.Test+"/"+c.Protocol]++
				}
			}
		}
	}
	for _, c := range ds.Cells {
		if ok[c.Test+"/"+c.Protocol] == 0 {
			t.Errorf("no valid sample for %s over %s", c.Test, c.Protocol)
		}
	}
	plt := checkChromiumSamples(t, db, ds)
	for _, k := range slices.Sorted(maps.Keys(plt)) {
		t.Logf("page load time %s: median %.1f ms of %d", k, stats.Median(plt[k]), len(plt[k]))
	}
}

// TestStudyPlansQuick runs the quick variant of every built-in study plan,
// each on up to 4 testbeds at once: the admission rule runs the cells that
// need the machine (Chromium, Lighthouse, unlimited links) alone and every
// sample must still be valid.
func TestStudyPlansQuick(t *testing.T) {
	needRoot(t)
	for _, name := range plan.BuiltinNames() {
		if name == "quick" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			p, err := plan.Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			if p, err = p.Quick(); err != nil {
				t.Fatal(err)
			}
			for _, c := range mustCells(t, p) {
				if c.Client == "firefox" {
					needFirefox(t)
				} else if peers.IsBrowser(c.Client) {
					if _, err := exec.LookPath("chromium"); err != nil {
						testsupport.Unavailable(t, "chromium is not installed")
					}
				}
				if c.Client == "lighthouse" {
					if _, err := lighthouse.Find(); err != nil {
						testsupport.Unavailable(t, "Lighthouse is not installed: %v", err)
					}
				}
			}
			db := filepath.Join(t.TempDir(), name+".db")
			start := time.Now()
			sum := runPlanParallel(t, p, db, 0, 4)
			t.Logf("%s (quick, --parallel 4): %d samples in %s, %d failed, %d invalid", name, sum.Taken, time.Since(start).Round(time.Second), sum.Failed, sum.Invalid)
			ds := load(t, db)
			checkComplete(t, ds)
			checkPrep(t, ds)
			client := map[int64]string{}
			for _, c := range ds.Cells {
				client[c.ID] = c.Client
			}
			for _, s := range ds.Samples {
				if s.Status != model.StatusOK {
					t.Errorf("sample of cell %d: %s: %s", s.CellID, s.Status, s.Error)
					continue
				}
				if client[s.CellID] != "lighthouse" {
					continue
				}
				// A Lighthouse sample's value is its score; the study's
				// score and the metrics behind it are stored beside it.
				if v, ok := s.Metrics["lh_score"]; !ok || v != s.Value || v < 0 || v > 100 {
					t.Errorf("lighthouse sample %d: value %v, lh_score %v", s.ID, s.Value, s.Metrics["lh_score"])
				}
				for _, k := range []string{"lh_study_score", "lh_fcp_ms", "lh_si_ms", "lh_lcp_ms", "lh_tti_ms", "lh_tbt_ms", "lh_cls", "plt_ms"} {
					if _, ok := s.Metrics[k]; !ok {
						t.Errorf("lighthouse sample %d: no %s", s.ID, k)
					}
				}
			}
		})
	}
}

// checkPrep checks the stored preparation of every valid sample: the tests
// that warm up or prime before their measured part (latency, handshake
// resumed and 0rtt, page and site with connection warm) and every Chromium
// sample (the browser's start) have one, the others none; the link drain
// and the preparation fit in the sample's overhead.
func checkPrep(t *testing.T, ds *model.Dataset) {
	t.Helper()
	cells := map[int64]*model.Cell{}
	for i := range ds.Cells {
		cells[ds.Cells[i].ID] = &ds.Cells[i]
	}
	bad := 0
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		f := map[string]string{}
		for _, x := range c.Factors {
			f[x.Name] = x.Value
		}
		prepares := peers.IsBrowser(c.Client) || c.Test == plan.TestLatency ||
			(c.Test == plan.TestHandshake && (f["mode"] == "resumed" || f["mode"] == "0rtt")) ||
			f["connection"] == plan.ConnWarm
		ok := s.Prep >= 0 && s.Drain >= 0 && s.Drain+s.Prep <= s.Overhead
		if s.Status == model.StatusOK {
			ok = ok && (s.Prep > 0) == prepares
		}
		if !ok && bad < 10 {
			t.Errorf("sample %d/%d of %s (%s): overhead %v, drain %v, prep %v", s.CellID, s.Iteration, c.Key, s.Status, s.Overhead, s.Drain, s.Prep)
		}
		if !ok {
			bad++
		}
	}
}

// smallPlanAndDB parses smallPlan and returns it with the path of a new
// database file named name.
func smallPlanAndDB(t *testing.T, name string) (*plan.Plan, string) {
	t.Helper()
	p, err := plan.Parse("small.yaml", []byte(smallPlan))
	if err != nil {
		t.Fatal(err)
	}
	return p, filepath.Join(t.TempDir(), name)
}

func mustCells(t *testing.T, p *plan.Plan) []model.Cell {
	cells, err := p.Expand()
	if err != nil {
		t.Fatal(err)
	}
	return cells
}

// TestResumeRefusesOtherSoftware: a run started by another quicbench
// version is not continued (its samples would not be comparable).
func TestResumeRefusesOtherSoftware(t *testing.T) {
	needRoot(t)
	p, db := smallPlanAndDB(t, "v.db")
	runPlan(t, p, db, 2)
	setQuicGo := func(v string) (was string) {
		t.Helper()
		raw, err := sql.Open("sqlite", db)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if err := raw.QueryRow(`SELECT quic_go_version FROM runs`).Scan(&was); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Exec(`UPDATE runs SET quic_go_version = ?`, v); err != nil {
			t.Fatal(err)
		}
		return was
	}
	orig := setQuicGo("v0.1.0")
	exe, _ := os.Executable()
	_, err := runner.Run(context.Background(), runner.Options{DB: db, Resume: true, Exe: exe})
	if err == nil || !strings.Contains(err.Error(), "quic-go version changed") {
		t.Fatalf("resume after a quic-go change: got %v, want a refusal naming the quic-go version", err)
	}
	// With the software as it was, a different plan given with --resume is
	// refused for what it is.
	setQuicGo(orig)
	other, err := plan.Parse("other.yaml", []byte(strings.Replace(smallPlan, "iterations: 4", "iterations: 5", 1)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = runner.Run(context.Background(), runner.Options{DB: db, Resume: true, Exe: exe, Plan: other})
	if err == nil || !strings.Contains(err.Error(), "the plan given differs from the plan the run was started with") {
		t.Fatalf("resume with another plan: got %v, want a refusal naming the plan change", err)
	}
}

// killServerAfter is a progress writer that kills the run's server
// process (a `serve` child of this test process) when the n-th progress
// line is written.
type killServerAfter struct {
	t      *testing.T
	n      int
	lines  int
	killed int
}

func (k *killServerAfter) Write(b []byte) (int, error) {
	k.lines += strings.Count(string(b), "\n")
	if k.killed == 0 && k.lines >= k.n {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err != nil || !strings.Contains(string(cmd), "\x00serve\x00") {
				continue
			}
			stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			if err != nil {
				continue
			}
			// the parent pid is the 4th field after the command in parentheses
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
				if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
					k.killed++
				}
			}
		}
	}
	return len(b), nil
}

// A server process killed mid-run is restarted, as the agent is: the run
// completes with at most the sample in flight failed, and says so.
func TestKilledServerIsRestarted(t *testing.T) {
	needRoot(t)
	p, db := smallPlanAndDB(t, "k.db")
	exe, _ := os.Executable()
	k := &killServerAfter{t: t, n: 4}
	sum, err := runner.Run(context.Background(), runner.Options{Plan: p, DB: db, Exe: exe, Progress: k, Mode: runner.ProgressLines})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if k.killed != 1 {
		t.Fatalf("killed %d server processes, want 1", k.killed)
	}
	if !sum.Complete || sum.Failed > 1 {
		t.Fatalf("run with a killed server: %+v (want complete, at most the sample in flight failed)", sum)
	}
	ds := load(t, db)
	checkComplete(t, ds)
	s, err := store.OpenReadOnly(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	warns, err := s.RunWarnings(context.Background(), ds.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range warns {
		found = found || strings.Contains(w, "server process exited") && strings.Contains(w, "restarted")
	}
	if !found {
		t.Errorf("no run warning says the server was restarted: %q", warns)
	}
}
