// Package faulttrial tries quicbench's resilience the way a long run on a
// cluster meets faults: it runs a small plan with the quicbench
// executable, injects one fault at a seeded random point (a SIGKILL of the
// runner, the agent, the server or Chromium, a SIGSTOP of the server
// beyond the sample timeout, a dead link, a full filesystem, a damaged
// database file, a second runner on the same database), and checks after
// each trial that nothing is left behind (process, network namespace, TUN
// device, database lock), that every sample the runner reported stored is
// still there exactly once, that the database passes SQLite's integrity
// check, and that quicbench run --resume completes the plan with as many
// samples as a run without faults.
//
// The suite is TestFaultTrials (go test ./faulttrial, as root): a short
// form of a few seeded trials per fault runs in CI; QUICBENCH_FAULT_TRIALS
// sets the trials per fault for the long form. docs/reliability.md
// describes each fault, what is checked and the measured table.
package faulttrial

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/store"
)

// Options configure the trials.
type Options struct {
	// Exe is the quicbench executable; Env is added to the environment of
	// every process started from it (a test binary standing in for
	// quicbench needs its switch there).
	Exe string
	Env []string
	// Dir is a scratch directory, one subdirectory per trial.
	Dir string
	// Trials is the number of trials per fault; Seed seeds every trial's
	// random choices (trial n of a fault uses Seed, the fault and n).
	Trials int
	Seed   uint64
	// Faults names the faults to try (nil: every fault in Faults).
	Faults []string
	// Log receives a line per trial.
	Log io.Writer
}

// Fault names, in the order of the table.
const (
	RunnerKill  = "runner SIGKILL"
	AgentKill   = "agent SIGKILL"
	ServerKill  = "server SIGKILL"
	BrowserKill = "browser SIGKILL mid-load"
	ServerStop  = "server SIGSTOP > timeout"
	LinkDead    = "link dead, then back"
	DiskFull    = "filesystem full"
	Corrupt     = "last page damaged"
	TwoRunners  = "second runner"
)

// Faults lists every fault the suite injects.
var Faults = []string{RunnerKill, AgentKill, ServerKill, BrowserKill, ServerStop, LinkDead, DiskFull, Corrupt, TwoRunners}

// Trial is the outcome of one trial.
type Trial struct {
	Fault string
	N     int // the trial's number, from 0
	Point int // samples stored when the fault was injected
	Lost  int // samples reported stored that are missing afterwards
	Dups  int // (cell, iteration) pairs stored more than once
	Left  []string
	// Recover is the time from the fault to the first valid sample stored
	// after it (by the same runner, or the resumed one after the checks);
	// for a damaged file, the time until it was refused; for a second
	// runner, until it was refused.
	Recover  time.Duration
	Problems []string // every check that failed
	Notes    []string // what happened, for the log
}

// Survived reports whether every check of the trial passed.
func (t *Trial) Survived() bool { return len(t.Problems) == 0 }

func (t *Trial) fail(format string, a ...any) {
	t.Problems = append(t.Problems, fmt.Sprintf(format, a...))
}

// The plans: a small one of short samples, and its variants.
const basePlan = `name: faults
seed: %d
iterations: 5
warmup: false
protocols: [h2, h3]
timeout: 3s
scenarios:
  - name: near
    link: "delay 5ms"
tests:
  - test: ttfb
  - test: download
    params: {size: 50KB}
`

const browserPlan = `name: faults-browser
seed: %d
iterations: 4
warmup: false
protocols: [h2, h3]
timeout: 8s
scenarios:
  - name: near
    link: "delay 5ms"
tests:
  - test: page
    client: %s
`

// The link-dead plan: a scenario whose link drops everything (every sample
// times out and is stored failed) and one with seeded blackouts.
const deadPlan = `name: faults-dead
seed: %d
iterations: 4
warmup: false
protocols: [h2, h3]
timeout: 2s
scenarios:
  - name: dead
    link: "loss 100%%"
  - name: blackout
    link: "onoff %dms %dms delay 5ms"
tests:
  - test: ttfb
`

// sampleTimeout is the base plan's timeout (SIGSTOP lasts longer).
const sampleTimeout = 3 * time.Second

// harness runs the trials.
type harness struct {
	opts     Options
	baseline map[string]int // plan kind -> samples of a run without faults
}

// Run runs opts.Trials trials of each fault, after a run of each plan
// without faults (the baseline sample counts), and returns every trial.
// It fails only when the trials cannot run at all (the baseline fails).
func Run(ctx context.Context, opts Options) ([]Trial, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	faults := opts.Faults
	if faults == nil {
		faults = Faults
	}
	h := &harness{opts: opts, baseline: map[string]int{}}
	var out []Trial
	for _, f := range faults {
		if !slices.Contains(Faults, f) {
			return out, fmt.Errorf("unknown fault %q (faults: %s)", f, strings.Join(Faults, ", "))
		}
		kind := planKind(f)
		if _, ok := h.baseline[kind]; !ok {
			n, err := h.runBaseline(ctx, kind)
			if err != nil {
				return out, fmt.Errorf("the %s plan without faults: %w", kind, err)
			}
			h.baseline[kind] = n
			fmt.Fprintf(opts.Log, "baseline %s plan: %d samples\n", kind, n)
		}
		for n := range opts.Trials {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			start := time.Now()
			t := h.trial(ctx, f, n)
			fmt.Fprintf(opts.Log, "%-26s #%d at sample %d: survived %v, lost %d, dups %d, leftovers %d, recovered in %s (trial %s)%s%s\n",
				f, n, t.Point, t.Survived(), t.Lost, t.Dups, len(t.Left), t.Recover.Round(time.Millisecond), time.Since(start).Round(100*time.Millisecond),
				join("; problems: ", t.Problems), join("; ", t.Notes))
			out = append(out, t)
		}
	}
	return out, nil
}

func join(prefix string, s []string) string {
	if len(s) == 0 {
		return ""
	}
	return prefix + strings.Join(s, "; ")
}

func planKind(fault string) string {
	switch fault {
	case BrowserKill:
		return "browser"
	case LinkDead:
		return "dead"
	}
	return "base"
}

// planText is the plan of kind for a trial whose random choices come from
// rng.
func planText(kind string, seed uint64, rng *rand.Rand) string {
	switch kind {
	case "browser":
		client := model.ClientBuiltin // no browser: the trial fails when it looks for one
		if st, err := faultBrowser(); err == nil {
			client = st.ClientName()
		}
		return fmt.Sprintf(browserPlan, seed, client)
	case "dead":
		on, off := 200, 1500
		if rng != nil {
			on, off = 100+rng.IntN(1400), 300+rng.IntN(2700)
		}
		return fmt.Sprintf(deadPlan, seed, on, off)
	}
	return fmt.Sprintf(basePlan, seed)
}

func (h *harness) runBaseline(ctx context.Context, kind string) (int, error) {
	dir := filepath.Join(h.opts.Dir, "baseline-"+kind)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	pf := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(pf, []byte(planText(kind, h.opts.Seed, nil)), 0o644); err != nil {
		return 0, err
	}
	db := filepath.Join(dir, "base.db")
	r := &runState{id: fmt.Sprintf("%d-baseline-%s", os.Getpid(), kind)}
	p, err := h.start(ctx, r, "run", "--plan", pf, "-o", db, "--jsonl", "--no-report")
	if err != nil {
		return 0, err
	}
	if err := p.wait(10 * time.Minute); err != nil {
		return 0, fmt.Errorf("%w: %s", err, p.stderr())
	}
	st, err := readDB(db)
	if err != nil {
		return 0, err
	}
	if st.status != store.RunComplete {
		return 0, fmt.Errorf("run status %q", st.status)
	}
	return st.total, nil
}

// runState is what a trial's quicbench processes reported.
type runState struct {
	id string // the value of markerEnv
	mu sync.Mutex
	// stored is every sample reported stored (cell key and iteration),
	// with its report time and status.
	stored []event
	ns     map[uint64]bool
	notify chan struct{}
}

type event struct {
	key string
	ok  bool
	at  time.Time
}

func (r *runState) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.stored)
}

// firstOKAfter is the time of the first valid sample reported after t.
func (r *runState) firstOKAfter(t time.Time) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.stored {
		if e.ok && e.at.After(t) {
			return e.at, true
		}
	}
	return time.Time{}, false
}

// failedBetween counts the failed samples reported between a and b.
func (r *runState) failedBetween(a, b time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.stored {
		if !e.ok && e.at.After(a) && e.at.Before(b) {
			n++
		}
	}
	return n
}

// qb is a running quicbench process of a trial.
type qb struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	errb syncBuffer
	out  sync.WaitGroup
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (p *qb) stderr() string { return strings.TrimSpace(p.errb.String()) }

// wait waits for the process to exit, at most d (then kills it).
func (p *qb) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("still running after %s: killed", d)
	}
}

func (p *qb) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start runs quicbench with args, marked with r.id; its JSON progress
// lines (--jsonl) are recorded in r.
func (h *harness) start(ctx context.Context, r *runState, args ...string) (*qb, error) {
	cmd := exec.CommandContext(ctx, h.opts.Exe, args...)
	cmd.Env = append(append(os.Environ(), h.opts.Env...), markerEnv+"="+r.id)
	// An interrupted suite leaves no runner behind (its own children die
	// with it the same way).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &qb{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &p.errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p.out.Add(1)
	go func() {
		defer p.out.Done()
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			var ev struct {
				Cell      string `json:"cell"`
				Iteration int    `json:"iteration"`
				Status    string `json:"status"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Cell == "" {
				continue
			}
			r.mu.Lock()
			r.stored = append(r.stored, event{key: fmt.Sprintf("%s#%d", ev.Cell, ev.Iteration), ok: ev.Status == "ok", at: time.Now()})
			if r.notify != nil {
				select {
				case r.notify <- struct{}{}:
				default:
				}
			}
			r.mu.Unlock()
		}
	}()
	go func() {
		p.out.Wait()
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitSamples waits until r has n samples reported, the process exits or
// d passes, recording the namespaces of the trial's processes meanwhile.
func (r *runState) waitSamples(p *qb, n int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for r.count() < n {
		namespaces(r.id, r.ns)
		if p.exited() {
			return fmt.Errorf("quicbench exited after %d samples, before %d: %v: %s", r.count(), n, p.err, p.stderr())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d samples of %d within %s", r.count(), n, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	namespaces(r.id, r.ns)
	return nil
}

// dbState is what a database holds.
type dbState struct {
	status string
	total  int
	keys   map[string]int // cell key#iteration -> rows
}

// readDB reads a database through quicbench's read-only path, after
// SQLite's integrity check.
func readDB(path string) (*dbState, error) {
	db, err := store.OpenReadOnly(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.IntegrityCheck(ctx); err != nil {
		return nil, err
	}
	run, err := db.LatestRun(ctx)
	if err != nil {
		return nil, err
	}
	ds, err := db.LoadDataset(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	keys := map[int64]string{}
	for _, c := range ds.Cells {
		keys[c.ID] = c.Key
	}
	st := &dbState{status: run.Status, total: len(ds.Samples), keys: map[string]int{}}
	for _, s := range ds.Samples {
		st.keys[fmt.Sprintf("%s#%d", keys[s.CellID], s.Iteration)]++
	}
	return st, nil
}

// writerOf is store.Writer for a database path that may not exist.
func writerOf(db string) (store.Holder, bool, error) {
	if db == "" {
		return store.Holder{}, false, nil
	}
	return store.Writer(db)
}

// trial runs trial n of fault f.
func (h *harness) trial(ctx context.Context, f string, n int) (t Trial) {
	t = Trial{Fault: f, N: n}
	seed := h.opts.Seed ^ uint64(slices.Index(Faults, f)+1)<<32 ^ uint64(n)
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	kind := planKind(f)
	total := h.baseline[kind]
	dir := filepath.Join(h.opts.Dir, fmt.Sprintf("%s-%d", strings.NewReplacer(" ", "-", ">", "gt").Replace(f), n))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.fail("%v", err)
		return t
	}
	pf := filepath.Join(dir, "plan.yaml")
	if err := os.WriteFile(pf, []byte(planText(kind, h.opts.Seed, rng)), 0o644); err != nil {
		t.fail("%v", err)
		return t
	}
	dbDir := dir
	if f == DiskFull {
		dbDir = filepath.Join(dir, "fs")
		unmount, err := smallFS(dbDir)
		if err != nil {
			t.fail("a small filesystem for the database: %v", err)
			return t
		}
		defer func() {
			if err := unmount(); err != nil {
				t.fail("%v", err)
			}
		}()
	}
	db := filepath.Join(dbDir, "trial.db")
	r := &runState{id: fmt.Sprintf("%d-%d-%d", os.Getpid(), slices.Index(Faults, f), n), ns: map[uint64]bool{}}
	// The fault's point: after 1 .. total-3 samples, so that samples
	// remain after the one the fault hits.
	t.Point = 1 + rng.IntN(total-3)
	if f == Corrupt {
		h.corruptTrial(ctx, &t, r, pf, db, rng)
		return t
	}
	p, err := h.start(ctx, r, "run", "--plan", pf, "-o", db, "--jsonl", "--no-report")
	if err != nil {
		t.fail("%v", err)
		return t
	}
	if f == LinkDead {
		t.Point = 0 // the plan's link itself is the fault
	} else if err := r.waitSamples(p, t.Point, 5*time.Minute); err != nil {
		p.cmd.Process.Kill()
		p.wait(time.Minute)
		t.fail("before the fault: %v", err)
		return t
	}
	at := time.Now()
	var filler string
	switch f {
	case RunnerKill:
		p.cmd.Process.Signal(syscall.SIGKILL)
	case AgentKill, ServerKill:
		name := map[string]string{AgentKill: "agent", ServerKill: "serve"}[f]
		if q, ok := find(r.id, subcommand(name)); ok {
			syscall.Kill(q.pid, syscall.SIGKILL)
		} else {
			t.fail("no %s process to kill", name)
		}
	case BrowserKill:
		h.killBrowser(&t, r, p, rng)
		at = time.Now()
	case ServerStop:
		if q, ok := find(r.id, subcommand("serve")); ok {
			syscall.Kill(q.pid, syscall.SIGSTOP)
			time.Sleep(sampleTimeout + time.Second + time.Duration(rng.IntN(1000))*time.Millisecond)
			syscall.Kill(q.pid, syscall.SIGCONT)
		} else {
			t.fail("no server process to stop")
		}
	case DiskFull:
		filler = filepath.Join(dbDir, "filler")
		if err := fill(filler); err != nil {
			t.fail("filling the filesystem: %v", err)
		}
	case TwoRunners:
		h.secondRunner(ctx, &t, r, p, db, at)
	}
	err = p.wait(5 * time.Minute)
	namespaces(r.id, r.ns)
	switch f {
	case RunnerKill:
		t.Notes = append(t.Notes, "runner killed")
		if out, cerr := h.command(ctx, r, "cleanup"); cerr != nil {
			t.fail("quicbench cleanup: %v: %s", cerr, out)
		}
	case DiskFull:
		if err == nil {
			t.Notes = append(t.Notes, "the run ended before it needed more space")
		} else if !strings.Contains(p.stderr(), "no space left") {
			t.fail("the runner stopped without saying the disk is full: %v: %s", err, lastLine(p.stderr()))
		} else {
			t.Notes = append(t.Notes, "stopped: "+diskFullLine(p.stderr()))
		}
	default:
		if err != nil {
			t.Notes = append(t.Notes, fmt.Sprintf("the run stopped (%v): %s", err, lastLine(p.stderr())))
		}
	}
	t.Left = append(t.Left, leftovers(r.id, r.ns, db, 15*time.Second)...)
	h.checkStored(&t, r, db)
	if filler != "" {
		os.Remove(filler)
	}
	// Resume until complete (a run the fault did not stop is complete).
	for attempt := 0; ; attempt++ {
		st, err := readDB(db)
		if err != nil {
			t.fail("reading the database: %v", err)
			break
		}
		if st.status == store.RunComplete {
			break
		}
		if attempt == 3 {
			t.fail("still %s after %d resumes", st.status, attempt)
			break
		}
		q, err := h.start(ctx, r, "run", "--resume", db, "--jsonl", "--no-report")
		if err != nil {
			t.fail("%v", err)
			break
		}
		if err := q.wait(5 * time.Minute); err != nil {
			t.fail("resume: %v: %s", err, lastLine(q.stderr()))
		}
		namespaces(r.id, r.ns)
	}
	h.checkStored(&t, r, db)
	if st, err := readDB(db); err == nil {
		if st.total != total {
			t.fail("%d samples at the end, a run without faults stores %d", st.total, total)
		}
	}
	t.Left = append(t.Left, leftovers(r.id, r.ns, db, 15*time.Second)...)
	if len(t.Left) > 0 {
		t.fail("left behind: %s", strings.Join(t.Left, "; "))
	}
	if f == TwoRunners || f == LinkDead {
		// Recover is the time the second runner took to be refused; a dead
		// link stops nothing (checkDead checks its samples).
	} else if ok, found := r.firstOKAfter(at); found {
		t.Recover = ok.Sub(at)
		if n := r.failedBetween(at, ok); n > 0 {
			t.Notes = append(t.Notes, fmt.Sprintf("%d sample(s) stored as failed before recovery", n))
		}
	} else {
		t.fail("no valid sample after the fault")
	}
	if f == LinkDead {
		h.checkDead(&t, db)
	}
	return t
}

// checkStored checks that every sample reported stored is in the database
// once, and that none is there twice.
func (h *harness) checkStored(t *Trial, r *runState, db string) {
	st, err := readDB(db)
	if err != nil {
		t.fail("reading the database: %v", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	lost, dups := 0, 0
	for _, e := range r.stored {
		if st.keys[e.key] == 0 {
			lost++
		}
	}
	for _, c := range st.keys {
		if c > 1 {
			dups += c - 1
		}
	}
	if lost > t.Lost {
		t.Lost = lost
	}
	if dups > t.Dups {
		t.Dups = dups
	}
	if lost > 0 || dups > 0 {
		t.fail("%d samples reported stored are missing, %d duplicated", lost, dups)
	}
}

// checkDead checks the link-dead trial: every sample over the dead link
// failed (stored as such, not lost), and the blackout scenario has valid
// samples (the link came back).
func (h *harness) checkDead(t *Trial, db string) {
	d, err := store.OpenReadOnly(db)
	if err != nil {
		t.fail("%v", err)
		return
	}
	defer d.Close()
	ctx := context.Background()
	run, err := d.LatestRun(ctx)
	if err != nil {
		t.fail("%v", err)
		return
	}
	ds, err := d.LoadDataset(ctx, run.ID)
	if err != nil {
		t.fail("%v", err)
		return
	}
	scen := map[int64]string{}
	for _, c := range ds.Cells {
		scen[c.ID] = c.Scenario
	}
	okBlackout, failedDead, dead := 0, 0, 0
	for _, s := range ds.Samples {
		switch scen[s.CellID] {
		case "dead":
			dead++
			if s.Status == "failed" && s.Error != "" {
				failedDead++
			}
		case "blackout":
			if s.Status == "ok" {
				okBlackout++
			}
		}
	}
	if failedDead != dead || dead == 0 {
		t.fail("%d of %d samples over the dead link are stored as failed with their error", failedDead, dead)
	}
	if okBlackout == 0 {
		t.fail("no valid sample over the link with blackouts")
	}
	t.Notes = append(t.Notes, fmt.Sprintf("%d timeouts recorded over the dead link, %d valid samples between blackouts", failedDead, okBlackout))
}

// faultBrowser is the browser client whose samples the browser fault
// kills: the first of the registry that tells its main process.
func faultBrowser() (*peers.Stack, error) {
	for _, st := range peers.All() {
		if st.Client != nil && st.Client.Kind == peers.KindBrowser && st.Client.MainProcess != nil {
			return st, nil
		}
	}
	return nil, errors.New("no browser client in the registry tells its main process")
}

// killBrowser kills the browser's main process while it starts or loads a
// page: at a random moment within 300 ms of it appearing (a sample's
// browser lives for about a second). If that browser is gone by then, the
// next one is tried.
func (h *harness) killBrowser(t *Trial, r *runState, p *qb, rng *rand.Rand) {
	st, err := faultBrowser()
	if err != nil {
		t.fail("%v", err)
		return
	}
	main := func(q process) bool { return st.Client.MainProcess.Matches(q.args) }
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) && !p.exited() {
		if q, ok := find(r.id, main); ok {
			namespaces(r.id, r.ns)
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			if _, still := find(r.id, func(o process) bool { return o.pid == q.pid }); still && syscall.Kill(q.pid, syscall.SIGKILL) == nil {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.fail("no %s main process to kill", st.Name)
}

// secondRunner starts quicbench run --resume on the database p writes: it
// must be refused at once, naming p, and store nothing.
func (h *harness) secondRunner(ctx context.Context, t *Trial, r *runState, p *qb, db string, at time.Time) {
	r2 := &runState{id: r.id, ns: r.ns}
	q, err := h.start(ctx, r2, "run", "--resume", db, "--jsonl", "--no-report")
	if err != nil {
		t.fail("%v", err)
		return
	}
	err = q.wait(time.Minute)
	t.Recover = time.Since(at)
	switch {
	case err == nil:
		t.fail("the second runner was not refused")
	case !strings.Contains(q.stderr(), "being written by another quicbench") || !strings.Contains(q.stderr(), fmt.Sprintf("pid %d ", p.cmd.Process.Pid)):
		t.fail("the second runner's refusal does not name the first: %s", q.stderr())
	}
	if n := r2.count(); n > 0 {
		t.fail("the second runner stored %d samples", n)
	}
	t.Notes = append(t.Notes, "refused in "+t.Recover.Round(time.Millisecond).String())
}

// corruptTrial stops a run after t.Point samples, damages the last page of
// its database, and checks that report, export and run --resume refuse it
// saying that it is damaged and write nothing; if the damaged page held no
// data (a free page), the database must still read back whole.
func (h *harness) corruptTrial(ctx context.Context, t *Trial, r *runState, pf, db string, rng *rand.Rand) {
	out, err := h.command(ctx, r, "run", "--plan", pf, "-o", db, "--jsonl", "--no-report", "--max-samples", fmt.Sprint(t.Point))
	if err != nil {
		t.fail("the run before the damage: %v: %s", err, out)
		return
	}
	before, err := readDB(db)
	if err != nil {
		t.fail("%v", err)
		return
	}
	truncate := rng.IntN(2) == 0
	if err := CorruptLastPage(db, truncate, rng); err != nil {
		t.fail("damaging the file: %v", err)
		return
	}
	how := map[bool]string{true: "last half page cut off", false: "random bytes over the last page"}[truncate]
	at := time.Now()
	refused := 0
	exportDir := filepath.Join(filepath.Dir(db), "export")
	for _, args := range [][]string{
		{"report", db, "--text"},
		{"export", db, "-o", exportDir},
		{"run", "--resume", db, "--jsonl", "--no-report"},
	} {
		out, err := h.command(ctx, r, args...)
		if err != nil && strings.Contains(out, "damaged") {
			refused++
			if refused == 1 {
				t.Recover = time.Since(at)
			}
			continue
		}
		if err == nil {
			continue // checked below: the page held no data
		}
		t.fail("%s of the damaged file failed without saying it is damaged: %v: %s", args[0], err, lastLine(out))
	}
	if _, err := os.Stat(exportDir); err == nil && refused > 0 {
		t.fail("export wrote %s from a damaged file", exportDir)
	}
	if refused == 0 {
		// Nothing refused it: the damage must have hit a page without data.
		after, err := readDB(db)
		if err != nil {
			t.fail("the damaged file (%s) was not refused, yet does not read back: %v", how, err)
		} else if after.total < before.total {
			t.fail("the damaged file (%s) was silently read with %d of its %d samples", how, after.total, before.total)
		} else {
			t.Notes = append(t.Notes, how+": the page held no data; the file reads back whole")
		}
	} else if refused < 3 {
		t.fail("%s: refused by %d of report, export and run --resume", how, refused)
	} else {
		t.Notes = append(t.Notes, how+": refused by report, export and run --resume")
	}
	t.Left = leftovers(r.id, r.ns, db, 15*time.Second)
	if len(t.Left) > 0 {
		t.fail("left behind: %s", strings.Join(t.Left, "; "))
	}
}

// command runs quicbench with args to its end and returns its output.
func (h *harness) command(ctx context.Context, r *runState, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.opts.Exe, args...)
	cmd.Env = append(append(os.Environ(), h.opts.Env...), markerEnv+"="+r.id)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// diskFullLine is the line of a runner's output that says the disk is full.
func diskFullLine(s string) string {
	for l := range strings.Lines(s) {
		if strings.Contains(l, "no space left") {
			return strings.TrimSpace(l)
		}
	}
	return lastLine(s)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// CorruptLastPage damages the SQLite database file at path: random bytes
// (from rng) over its last page, or (truncate) its last half page cut
// off. The page size is read from the file's header.
func CorruptLastPage(path string, truncate bool, rng *rand.Rand) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	var hdr [18]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return err
	}
	page := int64(hdr[16])<<8 | int64(hdr[17])
	if page == 1 {
		page = 65536
	}
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if st.Size() < 2*page {
		return fmt.Errorf("%s: too small to damage its last page", path)
	}
	if truncate {
		return f.Truncate(st.Size() - page/2)
	}
	b := make([]byte, page)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	_, err = f.WriteAt(b, st.Size()-page)
	return err
}

// smallFS mounts a 16 MiB tmpfs on dir (created) and returns its unmount.
func smallFS(dir string) (func() error, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "qbfaulttrial", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount tmpfs on %s: %v: %s", dir, err, out)
	}
	return func() error {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("umount %s: %v: %s", dir, err, out)
		}
		return nil
	}, nil
}

// fill writes the file at path until its filesystem has no space left.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return nil
			}
			return err
		}
	}
}
