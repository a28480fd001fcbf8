// Package runner executes a plan: it builds one testbed for the run, starts
// the server and the client agent inside its namespaces, takes every
// sample of the schedule (seeded, interleaved, paired) and stores each one
// the moment it is taken, so that an interrupted run loses at most the
// sample in flight and can be resumed.
package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

// Options configure a run.
type Options struct {
	Plan   *plan.Plan // the plan to run (ignored with Resume: the stored plan is used)
	DB     string     // SQLite database path
	Resume bool       // continue the unfinished run stored in DB
	Exe    string     // the quicbench executable (server and agent processes)
	// Progress receives progress output in Mode; Log receives diagnostics.
	Progress io.Writer
	Mode     ProgressMode
	Log      io.Writer
	// KeyLogDir and QlogDir, if set, receive the server's TLS key log and
	// qlog files (for Wireshark and qvis).
	KeyLogDir string
	QlogDir   string
	// MaxSamples stops the run after that many samples (0: no limit); the
	// run stays resumable. Used by tests and for partial runs.
	MaxSamples int
	// QUICEvents turns on quic-go's per-packet event tracing in the server
	// and the client (PTO counts, congestion events, retransmissions of
	// QUIC connections) at a CPU cost of 20-35% per MB for quic-go; off by
	// default so that QUIC is not handicapped against TCP.
	QUICEvents bool
	// Parallel is the most testbeds the run keeps taking samples at once
	// (0: the plan's parallel field, else 1); the admission rule
	// (plan.Admission) may run fewer. A resumed run may use another value.
	Parallel int
	// Capture adds to what the plan captures per sample (plan.CaptureSpec;
	// quicbench run --capture): a pcapng file of the emulator's packets
	// with the connections' TLS secrets, stored with the sample.
	Capture plan.CaptureSpec
	// WireTiming runs the emulator's tap without keeping captures, for the
	// samples' wire_* metrics (TTFB and goodput as the packets show them).
	WireTiming bool
	// AllowCommands lets the run execute the commands of the contract
	// stacks its plan declares (docs/plan-format.md, "Stacks of your
	// own"): quicbench runs as root, so a plan that declares a command is
	// code, run only when the user says so. Without it such a plan is
	// refused before anything runs.
	AllowCommands bool
	// Shard, when set (K of N), runs only the blocks of the plan's schedule
	// that plan.Plan.Shards(N) puts in shard K, each with the pairing and
	// seeds of the whole run, and records the shard with the run, so that
	// the N shards' databases merge into the whole run (store.Merge). A
	// resumed run keeps its stored shard: a Shard given with Resume must
	// equal it. Plans with a precision target cannot be sharded.
	Shard plan.Shard
}

// Summary is what a run did.
type Summary struct {
	RunID    int64
	Planned  int // samples in the plan, warm-ups included
	Resumed  int // samples already stored when the run started
	Taken    int // samples taken by this invocation
	Failed   int
	Invalid  int
	Warnings int
	Elapsed  time.Duration
	// Overheads is the per-sample time spent outside the measured part
	// (link reset, waiting for connections to close across the link, the
	// test's unmeasured preparation such as warm-up connections, priming
	// and the browser's start, control round trips, storing), per client,
	// over this invocation.
	Overheads []stats.ClientOverhead
	Complete  bool
	// Shard is the shard of the plan the run takes (zero: all of it);
	// Planned and the counts above are the shard's.
	Shard plan.Shard
}

// ErrInterrupted is returned when the context ends before the run is
// complete; the run is stored as interrupted and can be resumed.
var ErrInterrupted = errors.New("run interrupted")

// Run executes the plan (or resumes the stored run) and returns a summary.
func Run(ctx context.Context, opts Options) (*Summary, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if err := opts.Shard.Check(); err != nil {
		return nil, err
	}
	r := &run{opts: opts}
	return r.execute(ctx)
}

type run struct {
	opts    Options
	plan    *plan.Plan
	db      *store.DB
	runRec  model.Run
	cells   []model.Cell
	done    map[int64]map[int]bool
	links   map[string]spec.Link // every cell's link specs, parsed once before the samples
	siteDir string
	sites   map[string]string // site parameter value -> served site name
	// envMu guards runRec.Env, which every testbed's recordEnv updates.
	envMu sync.Mutex
	// slots are the testbeds, each with its server and agent (one for a
	// run of one testbed at a time); conc counts those taking a sample.
	slots []*slot
	conc  concurrency
	// shard is the part of the plan this run takes (zero: all of it).
	shard plan.Shard
	// cap is what the run captures per sample (capture.go).
	cap *runCapture
}

func (r *run) execute(ctx context.Context) (_ *Summary, err error) {
	start := time.Now()
	if err := r.open(ctx); err != nil {
		return nil, err
	}
	defer r.db.Close()
	steps := Schedule(r.cells, r.runRec.Seed)
	if unsupported, err := r.unsupportedCells(ctx); err != nil {
		return nil, err
	} else if len(unsupported) > 0 {
		kept := steps[:0]
		noted := map[string]bool{}
		for _, s := range steps {
			why, skip := unsupported[s.Cell.ID]
			if !skip {
				kept = append(kept, s)
				continue
			}
			if msg := fmt.Sprintf("cell %s skipped: %s", s.Cell.Key, why); !noted[msg] {
				noted[msg] = true
				if err := r.db.AddRunWarning(context.WithoutCancel(ctx), r.runRec.ID, msg); err != nil {
					return nil, err
				}
			}
		}
		steps = kept
	}
	if !r.shard.IsZero() {
		if steps, err = shardSteps(r.plan, steps, r.shard); err != nil {
			return nil, err
		}
	}
	sum := &Summary{RunID: r.runRec.ID, Planned: len(steps), Shard: r.shard}
	ad, err := r.adaptiveState(ctx)
	if err != nil {
		return nil, err
	}
	var todo []Step
	for _, s := range steps {
		if r.done[s.Cell.ID][s.Iteration] {
			sum.Resumed++
			continue
		}
		if ad != nil && ad.stopped(s) {
			sum.Planned-- // the group stopped on its rule before this step
			continue
		}
		todo = append(todo, s)
	}
	if len(todo) == 0 {
		sum.Complete = true
		return sum, r.db.UpdateRunStatus(context.WithoutCancel(ctx), r.runRec.ID, "complete", time.Now())
	}
	prog := newProgress(opts(r).Progress, r.opts.Mode)
	defer prog.finish()
	slots, asked := r.parallelism()
	if slots > 1 && r.plan.Pin() {
		return sum, fmt.Errorf("the plan pins the emulator, server and client to CPUs of their own (pin: true), which only one testbed at a time can have: run without --parallel")
	}
	prog.slots = slots
	// Each sample's estimate (nil when the plan cannot be estimated: the
	// ETA then falls back to the mean time per sample).
	est := sampleEstimates(r.plan, r.cells)
	var remaining time.Duration
	if est != nil {
		for _, s := range todo {
			remaining += est[s.Cell.Key]
		}
		// On several testbeds: the samples left, shortened by the whole
		// plan's parallel speed-up (plan.Plan.EstimateWith).
		par := remaining
		if e, err := r.plan.EstimateWith(slots); err == nil && slots > 1 && e.Total > 0 {
			par = time.Duration(float64(remaining) * float64(e.Parallel) / float64(e.Total))
		}
		prog.start(len(todo), sum.Planned, remaining, par)
	}
	defer r.teardown() // also what a failed setup started
	if err := r.setup(ctx); err != nil {
		r.markInterrupted(ctx)
		return nil, err
	}
	d := &dispatch{r: r, ad: ad, sum: sum, prog: prog, est: est, remaining: remaining, todo: len(todo), start: start, slots: slots, asked: asked}
	err = d.run(ctx, todo)
	sum.Elapsed = time.Since(start)
	sum.Overheads = stats.Overheads(d.overheads)
	if err != nil {
		r.markInterrupted(ctx)
		return sum, err
	}
	if sum.Resumed+sum.Taken == sum.Planned {
		sum.Complete = true
		return sum, r.db.UpdateRunStatus(context.WithoutCancel(ctx), r.runRec.ID, "complete", time.Now())
	}
	r.markInterrupted(ctx)
	if ctx.Err() != nil {
		return sum, ErrInterrupted
	}
	return sum, nil
}

func opts(r *run) Options { return r.opts }

// adaptiveState returns the stopping rule's state of an adaptive plan (nil
// for fixed iterations): on resume, with the samples and stops stored, and
// the stops of groups whose last stored iteration was not judged yet.
func (r *run) adaptiveState(ctx context.Context) (*adaptive, error) {
	if r.plan.Precision() <= 0 {
		return nil, nil
	}
	var samples []model.Sample
	var stops []model.GroupStop
	if r.opts.Resume {
		ds, err := r.db.LoadDataset(ctx, r.runRec.ID)
		if err != nil {
			return nil, err
		}
		samples, stops = ds.Samples, ds.Stops
	}
	ad := newAdaptive(r.plan, r.cells, samples, stops)
	for _, st := range ad.judgeAll() {
		if err := r.storeStop(ctx, st); err != nil {
			return nil, err
		}
	}
	return ad, nil
}

// sampleEstimates returns the estimated time of one sample of each cell
// (plan.Plan.EstimateCell), by cell key; nil if a cell cannot be estimated.
func sampleEstimates(p *plan.Plan, cells []model.Cell) map[string]time.Duration {
	if p == nil {
		return nil
	}
	m := make(map[string]time.Duration, len(cells))
	for i := range cells {
		d, err := p.EstimateCell(&cells[i])
		if err != nil {
			return nil
		}
		m[cells[i].Key] = d
	}
	return m
}

func (r *run) markInterrupted(ctx context.Context) {
	if r.db != nil && r.runRec.ID != 0 {
		_ = r.db.UpdateRunStatus(context.WithoutCancel(ctx), r.runRec.ID, "interrupted", time.Time{})
	}
}

// open creates the run in a new database, or loads the unfinished run of
// an existing one and checks that it may be resumed.
func (r *run) open(ctx context.Context) error {
	env := sysinfo.Environment()
	if r.opts.Resume {
		db, err := store.OpenExisting(r.opts.DB)
		if err != nil {
			return err
		}
		r.db = db
		rec, err := db.LatestRun(ctx)
		if err != nil {
			db.Close()
			return fmt.Errorf("%s: %w", r.opts.DB, err)
		}
		if rec.Status == "complete" {
			db.Close()
			return fmt.Errorf("%s: run %d is already complete; nothing to resume", r.opts.DB, rec.ID)
		}
		p, err := plan.Parse(rec.PlanName+".yaml", []byte(rec.PlanText))
		if err == nil {
			r.plan = p
			if err := r.checkCommands(); err != nil {
				db.Close()
				return err
			}
		}
		if err != nil {
			db.Close()
			return fmt.Errorf("%s: the stored plan no longer parses with this quicbench: %w", r.opts.DB, err)
		}
		p.Seed = rec.Seed
		if err := resumable(rec, p, env); err != nil {
			db.Close()
			return fmt.Errorf("cannot resume %s: %w", r.opts.DB, err)
		}
		if r.opts.Plan != nil && r.opts.Plan.Hash() != rec.PlanHash {
			db.Close()
			return fmt.Errorf("cannot resume %s: the plan given differs from the plan the run was started with (hash %.12s vs %.12s); resume without --plan, or start a new database", r.opts.DB, r.opts.Plan.Hash(), rec.PlanHash)
		}
		k, n, err := db.RunShard(ctx, rec.ID)
		if err != nil {
			db.Close()
			return err
		}
		r.shard = plan.Shard{K: k, N: n}
		if !r.opts.Shard.IsZero() && r.opts.Shard != r.shard {
			db.Close()
			stored := "the whole run (no shard)"
			if !r.shard.IsZero() {
				stored = "shard " + r.shard.String()
			}
			return fmt.Errorf("cannot resume %s as shard %s: it holds %s; resume without --shard", r.opts.DB, r.opts.Shard, stored)
		}
		r.plan, r.runRec = p, rec
		if env.Hostname != rec.Env.Hostname {
			// A shard requeued onto another node: its samples from now on
			// are not taken where runs.hostname says.
			msg := fmt.Sprintf("resumed on host %q (the run started on %q): samples taken from now on ran there", env.Hostname, rec.Env.Hostname)
			if err := db.AddRunWarning(ctx, rec.ID, msg); err != nil {
				db.Close()
				return err
			}
		}
		if r.cells, err = db.Cells(ctx, rec.ID); err != nil {
			db.Close()
			return err
		}
		if r.done, err = db.DoneSamples(ctx, rec.ID); err != nil {
			db.Close()
			return err
		}
		return db.UpdateRunStatus(ctx, rec.ID, "running", time.Time{})
	}
	if r.opts.Plan == nil {
		return errors.New("no plan given")
	}
	if _, err := os.Stat(r.opts.DB); err == nil {
		return fmt.Errorf("%s already exists: continue it with --resume, or choose another file with -o", r.opts.DB)
	}
	r.plan = r.opts.Plan
	if err := r.checkCommands(); err != nil {
		return err
	}
	cells, err := r.opts.Plan.Expand()
	if err != nil {
		return err
	}
	if len(cells) == 0 {
		return errors.New("the plan has no cells to measure")
	}
	r.shard = r.opts.Shard
	if !r.shard.IsZero() {
		if r.opts.Plan.Precision() > 0 {
			return fmt.Errorf("shard %s: a plan with a precision target (adaptive iterations) cannot be cut into shards: its stopping rule judges all of a group's iterations, which would be spread over the shards; run it whole, or with fixed iterations (--precision 0)", r.shard)
		}
		if _, err := r.opts.Plan.Shards(r.shard.N); err != nil {
			return fmt.Errorf("shard %s: %w", r.shard, err)
		}
	}
	db, err := store.Open(r.opts.DB)
	if err != nil {
		return err
	}
	r.db, r.plan = db, r.opts.Plan
	r.runRec = model.Run{
		PlanName: r.plan.Name, PlanText: string(r.plan.YAML()), PlanHash: r.plan.Hash(),
		Seed: r.plan.Seed, Started: time.Now(), Status: "running", Env: env,
	}
	if err := db.CreateRun(ctx, &r.runRec); err != nil {
		db.Close()
		return err
	}
	if !r.shard.IsZero() {
		if err := db.SetRunShard(ctx, r.runRec.ID, r.shard.K, r.shard.N); err != nil {
			db.Close()
			return err
		}
		msg := fmt.Sprintf("shard %d of %d: this run takes only its shard's blocks of the plan; merge the %d shards' databases with quicbench merge", r.shard.K, r.shard.N, r.shard.N)
		if err := db.AddRunWarning(ctx, r.runRec.ID, msg); err != nil {
			db.Close()
			return err
		}
	}
	for _, n := range r.plan.Notes() {
		_ = db.AddRunWarning(ctx, r.runRec.ID, "plan: "+n)
	}
	if err := db.InsertCells(ctx, r.runRec.ID, cells); err != nil {
		db.Close()
		return err
	}
	r.cells = cells
	r.done = map[int64]map[int]bool{}
	return nil
}

// resumable refuses to mix samples taken by different software or plans.
func resumable(rec model.Run, p *plan.Plan, env model.Environment) error {
	if p.Hash() != rec.PlanHash {
		return fmt.Errorf("the stored plan expands differently with this quicbench (plan hash %.12s, stored %.12s)", p.Hash(), rec.PlanHash)
	}
	type pair struct{ what, was, now string }
	for _, c := range []pair{
		{"quicbench version", rec.Env.Version, env.Version},
		{"quicbench commit", rec.Env.Commit, env.Commit},
		{"quic-go version", rec.Env.QuicGoVersion, env.QuicGoVersion},
		{"Go version", rec.Env.GoVersion, env.GoVersion},
		{"kernel", rec.Env.Kernel, env.Kernel},
	} {
		if c.was != c.now {
			return fmt.Errorf("the %s changed (%q when the run started, %q now): samples would not be comparable", c.what, c.was, c.now)
		}
	}
	return nil
}

// setup parses every cell's links, prepares the sites and builds the first
// testbed with its endpoints (the others are built when the dispatch first
// needs them), and records the browser the run's browser samples use.
func (r *run) setup(ctx context.Context) error {
	r.links = map[string]spec.Link{}
	for i := range r.cells {
		if _, _, err := r.parseLinks(&r.cells[i]); err != nil {
			return err
		}
	}
	if err := r.prepareSites(); err != nil {
		return err
	}
	if err := r.checkPeers(ctx); err != nil {
		return err
	}
	if err := r.setupCapture(ctx); err != nil {
		return err
	}
	t, err := r.newSlot(ctx, 0)
	if err != nil {
		return err
	}
	return t.recordBrowser(ctx)
}

// newSlot builds testbed id (its namespaces and link emulator, on the
// first cell's link until a sample sets its own), records its
// environment and starts its server and agent.
func (r *run) newSlot(ctx context.Context, id int) (*slot, error) {
	first := r.cells[0]
	up, down, err := r.linksOf(&first)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("r%d-%d", r.runRec.ID, os.Getpid())
	if id > 0 {
		name += fmt.Sprintf("-%d", id)
	}
	tb, err := netns.New(ctx, netns.Config{Name: name, Up: up, Down: down, CC: first.CC, Pin: r.plan.Pin(), Tap: r.tapOptions()})
	if err != nil {
		return nil, fmt.Errorf("testbed: %w", err)
	}
	t := &slot{run: r, id: id, tb: tb}
	if err := t.recordEnv(ctx, true); err != nil {
		t.close()
		return nil, err
	}
	if err := t.startCapture(); err != nil {
		t.close()
		return nil, err
	}
	if err := t.startEndpoints(ctx, first.ServerImpl(), first.CC); err != nil {
		t.close()
		return nil, err
	}
	r.slots = append(r.slots, t)
	return t, nil
}

// recordEnv stores the parts of the run's environment that the testbeds
// determine: the congestion controls and the sysctls. It runs once a
// testbed is built (first set; for a resumed run this merges with what the
// earlier invocations stored) and after every link change, because the
// socket buffer limits grow when a link needs more: the stored values are
// the largest the run used. It writes only when something changed.
func (r *slot) recordEnv(ctx context.Context, first bool) error {
	cur := r.tb.Sysctls()
	if !first && maps.Equal(cur, r.tbSysctls) {
		return nil
	}
	r.tbSysctls = cur
	r.envMu.Lock()
	defer r.envMu.Unlock()
	env := r.runRec.Env
	// The testbed's routes give each cell's congestion control to every TCP
	// connection across the link; the namespaces' default may differ where
	// the host restricts it (tcp_allowed_congestion_control): record both.
	cc := ccDescription(r.cells, r.tb.DefaultCC())
	var notes []string
	if first && r.id == 0 && env.CCClient != "" && env.CCClient != cc {
		notes = append(notes, fmt.Sprintf("TCP congestion control changed when the run was resumed (%q for the earlier samples, %q for later ones)", env.CCClient, cc))
	}
	env.CCClient, env.CCServer = cc, cc
	var more []string
	env.Sysctls, more = mergeSysctls(env.Sysctls, cur)
	notes = append(notes, more...)
	if env.CCClient == r.runRec.Env.CCClient && env.CCServer == r.runRec.Env.CCServer && maps.Equal(env.Sysctls, r.runRec.Env.Sysctls) {
		return nil
	}
	for _, n := range notes {
		if err := r.db.AddRunWarning(context.WithoutCancel(ctx), r.runRec.ID, n); err != nil {
			return fmt.Errorf("store: %w", err)
		}
	}
	if err := r.db.UpdateRunEnv(context.WithoutCancel(ctx), r.runRec.ID, env); err != nil {
		return err
	}
	r.runRec.Env = env
	return nil
}

// recordBrowser stores the products and versions of the browsers that
// take the run's samples: for each browser or audit client of the plan,
// what the agent reads by starting it once inside the client namespace as
// for its samples ("Chrome/156.0.8078.73", "Firefox/153.8.0", an audit
// client's own versions after its browser's), each part once, in plan
// order. A resumed run refuses other versions than those its earlier
// samples were taken with. A client whose version cannot be read gets a
// run warning (its samples will fail with the cause) and the others are
// recorded and checked.
func (r *slot) recordBrowser(ctx context.Context) error {
	var clients []string
	for _, c := range r.cells {
		if peers.IsBrowser(c.Client) && !slices.Contains(clients, c.Client) {
			clients = append(clients, c.Client)
		}
	}
	if len(clients) == 0 {
		return nil
	}
	warn := func(msg string) error { return r.db.AddRunWarning(context.WithoutCancel(ctx), r.runRec.ID, msg) }
	var parts []string
	for _, client := range clients {
		v, err := r.agent.clientVersion(ctx, client)
		if err != nil {
			if err := warn(fmt.Sprintf("the %s samples will fail: its version could not be read: %v", client, err)); err != nil {
				return err
			}
			continue
		}
		for _, p := range strings.Split(v, "; ") {
			if p != "" && !slices.Contains(parts, p) {
				parts = append(parts, p)
			}
		}
	}
	if len(parts) == 0 {
		return nil
	}
	v := strings.Join(parts, "; ")
	old, err := r.db.RunBrowser(ctx, r.runRec.ID)
	if err != nil {
		return err
	}
	if old != "" && old != v {
		return fmt.Errorf("cannot resume %s: the browser changed (%q when the run started, %q now): samples would not be comparable", r.opts.DB, old, v)
	}
	if old == v {
		return nil
	}
	return r.db.SetRunBrowser(context.WithoutCancel(ctx), r.runRec.ID, v)
}

// ccDescription describes the congestion controls of the run's TCP sockets:
// each cell's, which the testbed's routes give every TCP connection across
// the link, in plan order, and the namespaces' default.
func ccDescription(cells []model.Cell, nsDefault string) string {
	var ccs []string
	for _, c := range cells {
		if c.CC != "" && !slices.Contains(ccs, c.CC) {
			ccs = append(ccs, c.CC)
		}
	}
	what := "every TCP connection, by the testbed's routes"
	if len(ccs) > 1 {
		what = "every TCP connection, each cell's, by the testbed's routes"
	}
	return strings.Join(ccs, ", ") + " (" + what + "; namespace default " + nsDefault + ")"
}

// mergeSysctls merges the sysctls a testbed applies now (cur) into those
// recorded so far (old: earlier links, or an earlier invocation of a
// resumed run). Socket buffer limits keep the triple with the largest
// maximum, so the record shows the largest limits any sample had; any
// other value that changed takes the current value and is described in a
// note (a run-level warning: samples before and after differ).
func mergeSysctls(old, cur map[string]string) (map[string]string, []string) {
	out := make(map[string]string, len(cur)+len(old))
	maps.Copy(out, old)
	var notes []string
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		v := cur[k]
		was, ok := old[k]
		switch {
		case !ok || was == v:
			out[k] = v
		case slices.Contains(netns.BufferSysctls, k):
			if tripleMax(v) > tripleMax(was) {
				out[k] = v
			}
		default:
			out[k] = v
			notes = append(notes, fmt.Sprintf("sysctl %s changed during the run (%q for the earlier samples, %q for later ones)", k, was, v))
		}
	}
	return out, notes
}

// tripleMax is the last field of a "min default max" sysctl value (-1 if it
// is not a number).
func tripleMax(v string) int64 {
	f := strings.Fields(v)
	if len(f) == 0 {
		return -1
	}
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// prepareSites generates the built-in sites the plan uses and maps user
// site directories to served names.
func (r *run) prepareSites() error {
	r.sites = map[string]string{}
	for i := range r.cells {
		v, ok := r.cells[i].Factor("site")
		if !ok || r.cells[i].Test != plan.TestSite {
			continue
		}
		if _, done := r.sites[v]; done {
			continue
		}
		if shape, ok := sites.Lookup(v); ok {
			if r.siteDir == "" {
				d, err := os.MkdirTemp("", "quicbench-sites-")
				if err != nil {
					return err
				}
				r.siteDir = d
			}
			dir := filepath.Join(r.siteDir, shape.Name)
			if err := sites.Write(dir, shape); err != nil {
				return err
			}
			r.sites[v] = shape.Name + "=" + dir
			continue
		}
		if st, err := os.Stat(v); err != nil || !st.IsDir() {
			return fmt.Errorf("site %q is neither a generated site (%s) nor a directory", v, strings.Join(sites.Names(), ", "))
		}
		r.sites[v] = "user" + strconv.Itoa(len(r.sites)) + "=" + v
	}
	return nil
}

// requestParams decodes the test parameters of a cell for the client
// agent (plan.StoredCellParams: a cell of a resumed run stored before its
// test had a parameter takes the default), with a site named by what the
// server serves it as.
func (r *run) requestParams(c *model.Cell) (plan.Params, error) {
	p, err := plan.StoredCellParams(c)
	if err != nil {
		return p, err
	}
	if served, ok := r.sites[p.Site]; ok && c.Test == plan.TestSite {
		p.Site, _, _ = strings.Cut(served, "=")
	}
	return p, nil
}

func (r *run) teardown() {
	var wg sync.WaitGroup
	for _, t := range r.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.close()
		}()
	}
	wg.Wait()
	if r.siteDir != "" {
		os.RemoveAll(r.siteDir)
	}
}

// parseLinks parses the link specs of a cell into r.links.
func (r *run) parseLinks(c *model.Cell) (up, down spec.Link, err error) {
	parse := func(s string) (spec.Link, error) {
		if l, ok := r.links[s]; ok {
			return l, nil
		}
		l, err := spec.Parse(s)
		if err != nil {
			return l, fmt.Errorf("cell %s: link %q: %w", c.Key, s, err)
		}
		r.links[s] = l
		return l, nil
	}
	if up, err = parse(c.LinkUp); err != nil {
		return
	}
	down, err = parse(c.LinkDown)
	return
}

// linksOf returns the parsed link specs of a cell (setup parsed them all:
// the testbeds read r.links at once and never write it).
func (r *run) linksOf(c *model.Cell) (up, down spec.Link, err error) {
	up, ok1 := r.links[c.LinkUp]
	down, ok2 := r.links[c.LinkDown]
	if !ok1 || !ok2 {
		return up, down, fmt.Errorf("cell %s: links not parsed", c.Key)
	}
	return up, down, nil
}

// counters returns the emulator counters of both directions.
func (r *slot) counters() (up, down emu.Counters) { return r.tb.Counters() }
