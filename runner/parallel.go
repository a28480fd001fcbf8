package runner

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/internal/sysinfo"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/stats"
)

// slot is one testbed of a run with its server and client agent. A run of
// one testbed at a time has one slot; a parallel run builds up to its
// parallelism, each taking whole blocks of samples (all protocols of one
// iteration of one cell group, so that pairs meet the same link and seed
// on the same testbed). A slot embeds its run: its methods reach the run's
// plan, database and cells as r.X, and its own testbed as r.tb.
type slot struct {
	*run
	id    int // 0..N-1, stored with each sample (model.Sample.Slot)
	tb    *netns.Testbed
	srv   *serverProc // the server of the sample being taken
	agent *agentProc
	cc    string // congestion control srv was started with
	// parked are the slot's other servers, by implementation, kept running
	// while another implementation serves (a plan with server: [...]
	// alternates between them at group boundaries).
	parked map[string]*serverProc
	// competingPorts are the server-side ports of the competing flows of
	// the sample being taken (package traffic), whose connections are not
	// the sample's.
	competingPorts map[uint16]bool
	// tbSysctls are the testbed's sysctls when the environment was last
	// recorded (recordEnv).
	tbSysctls map[string]string
	overhead  overheadMeter
	// browser: the slot has taken a block in a browser, whose browser it
	// may keep (the dispatch keeps browser blocks on few testbeds).
	browser bool
	// capt is the testbed's capture (capture.go); nil without one.
	capt *slotCapture
}

// close stops the slot's agent and server and removes its testbed.
func (r *slot) close() {
	if r.agent != nil {
		r.agent.close()
	}
	if r.srv != nil {
		r.srv.close()
	}
	for _, s := range r.parked {
		s.close()
	}
	r.closeCapture()
	if r.tb != nil {
		r.tb.Close()
	}
}

// concurrency counts the testbeds taking a sample at once and, for each
// sample in progress, the most that did while it ran (itself included).
type concurrency struct {
	mu     sync.Mutex
	active map[int]int // slot -> most testbeds active during its sample so far
}

// begin marks slot id's sample as started.
func (c *concurrency) begin(id int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active == nil {
		c.active = map[int]int{}
	}
	c.active[id] = 0
	n := len(c.active)
	for k, v := range c.active {
		c.active[k] = max(v, n)
	}
}

// end marks slot id's sample as ended and returns its concurrency.
func (c *concurrency) end(id int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.active[id]
	delete(c.active, id)
	return max(n, 1)
}

// block is the unit a parallel run hands a testbed: the steps of one
// iteration of one cell group, in their seeded order.
type block struct {
	steps []Step
	group string
	est   time.Duration // the steps' estimate; 0 when the plan has none
}

// blocksOf cuts a schedule into blocks: consecutive steps of the same
// group and iteration.
func blocksOf(steps []Step, est map[string]time.Duration) []*block {
	var out []*block
	for _, s := range steps {
		if n := len(out); n > 0 {
			b := out[n-1]
			if last := b.steps[len(b.steps)-1]; last.Cell.Group == s.Cell.Group && last.Iteration == s.Iteration {
				b.steps = append(b.steps, s)
				b.est += est[s.Cell.Key]
				continue
			}
		}
		out = append(out, &block{steps: []Step{s}, group: s.Cell.Group, est: est[s.Cell.Key]})
	}
	return out
}

// event is what a testbed reports to the dispatch: a stored sample, an
// error that ends the run, or the end of its block.
type event struct {
	slot   *slot
	step   Step
	sample *model.Sample
	err    error
	end    bool
}

// dispatch runs the steps of an invocation on the run's testbeds: with a
// parallelism of 1, block after block in schedule order on one testbed
// (exactly the serial run); with more, the blocks in plan.ParallelOrder on
// up to that many testbeds, each started only when plan.Admission admits
// its predicted load beside the blocks running. All bookkeeping (the
// summary, the adaptive rule, the failure streak, progress) happens in
// the dispatching goroutine; the testbeds only take and store samples.
type dispatch struct {
	r         *run
	ad        *adaptive
	sum       *Summary
	prog      *progress
	est       map[string]time.Duration
	remaining time.Duration // estimate of the steps not taken yet
	todo      int           // steps this invocation set out to take
	start     time.Time

	slots     int // the most testbeds active at once
	asked     int // the parallelism asked for, when it exceeded plan.MaxParallel (0 otherwise)
	rule      plan.Admission
	first     time.Time
	doneEst   time.Duration
	curve     *progressCurve // the replayed course of a parallel run with estimates
	handled   int
	overheads []stats.OverheadSample
	streak    failStreak

	model    map[int64]plan.SampleLoad // the cells' predicted loads
	measured map[int64]*meanOf         // the cells' measured loads

	stop    atomic.Bool // no testbed starts another sample
	mu      sync.Mutex
	started int // samples started (MaxSamples)
}

// meanOf is a running mean.
type meanOf struct {
	sum float64
	n   int
}

// parallelism is the most testbeds the run keeps active: the option, else
// the plan's field, else 1, capped at plan.MaxParallel for this machine
// and at what its available memory holds (plan.MemoryLimits); asked is
// what was asked for when a cap applied (0 otherwise).
func (r *run) parallelism() (n, asked int) {
	n = r.opts.Parallel
	if n <= 0 {
		n = r.plan.Parallel()
	}
	n = max(n, 1)
	if lim := r.limits(n); lim.slots < n {
		return lim.slots, n
	}
	return n, 0
}

// parallelLimits are the bounds of a parallel run on this machine.
type parallelLimits struct {
	slots    int   // testbeds: asked, capped by CPUs and memory
	cpuCap   int   // plan.MaxParallel(CPUs)
	memCap   int   // the testbeds the available memory holds (0: unknown)
	fileCap  int   // the testbeds whose files RLIMIT_NOFILE holds (0: unknown)
	browsers int   // blocks in a browser at once (0: no limit)
	avail    int64 // MemAvailable when read (0: unknown)
}

// limits returns the bounds of a run asking for n testbeds: the CPU cap,
// and the memory limits of plan.MemoryLimits with the memory available
// now (none when it cannot be read).
func (r *run) limits(n int) parallelLimits {
	var nofile uint64
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		nofile = rl.Cur
	}
	avail, err := sysinfo.MemAvailable()
	if err != nil {
		avail = 0
	}
	return limitsFor(n, runtime.NumCPU(), avail, nofile, r.cells)
}

// limitsFor is limits for a machine of cpus CPUs with avail bytes of
// memory available (0: unknown) and a limit of nofile open files (0:
// unknown), for a run of cells asking for n testbeds.
func limitsFor(n, cpus int, avail int64, nofile uint64, cells []model.Cell) parallelLimits {
	l := parallelLimits{cpuCap: plan.MaxParallel(cpus)}
	l.slots = min(n, l.cpuCap)
	if n <= 1 {
		return l
	}
	if nofile > 0 {
		l.fileCap = plan.FileLimit(nofile)
		l.slots = min(l.slots, l.fileCap)
	}
	if avail <= 0 {
		return l
	}
	l.avail = avail
	l.memCap, _ = plan.MemoryLimits(avail, math.MaxInt, nil)
	l.slots, l.browsers = plan.MemoryLimits(avail, l.slots, cells)
	return l
}

func (d *dispatch) run(ctx context.Context, todo []Step) error {
	r := d.r
	n := d.slots
	lim := r.limits(max(d.asked, n))
	if d.asked > 0 {
		why := fmt.Sprintf("plan.MaxParallelPerCPU x %d CPUs", runtime.NumCPU())
		switch {
		case lim.memCap > 0 && lim.memCap < lim.cpuCap && (lim.fileCap == 0 || lim.memCap <= lim.fileCap):
			why = fmt.Sprintf("the memory available, %d MB, holds %d of %d MB each (plan.MemPerTestbed, plan.MemShare)", lim.avail>>20, lim.memCap, plan.MemPerTestbed>>20)
		case lim.fileCap > 0 && lim.fileCap < lim.cpuCap:
			why = fmt.Sprintf("the open files limit (ulimit -n) holds %d testbeds of %d files each (plan.FilesPerTestbed)", lim.fileCap, plan.FilesPerTestbed)
		}
		msg := fmt.Sprintf("parallel %d capped at %d testbeds (%s)", d.asked, n, why)
		fmt.Fprintln(r.opts.Log, "quicbench: "+msg)
	}
	d.rule = plan.Admission{Slots: n, Budget: plan.LoadBudget(runtime.NumCPU())}
	if n > 1 {
		d.rule.Browsers = lim.browsers
	}
	d.model = map[int64]plan.SampleLoad{}
	d.measured = map[int64]*meanOf{}
	if err := r.db.SetRunParallel(context.WithoutCancel(ctx), r.runRec.ID, n); err != nil {
		return err
	}

	pending := blocksOf(todo, d.est)
	if n > 1 {
		loads := make([]plan.SampleLoad, len(pending))
		info := make([]plan.Block, len(pending))
		for i, b := range pending {
			loads[i] = d.blockLoad(b)
			info[i] = plan.Block{Exclusive: loads[i].Exclusive, Duration: b.est}
		}
		if d.est != nil {
			d.curve = d.replay(pending, loads)
		}
		ordered := make([]*block, len(pending))
		for i, k := range plan.ParallelOrder(info) {
			ordered[i] = pending[k]
		}
		pending = ordered
	}

	events := make(chan event)
	running := map[*slot]plan.SampleLoad{}
	inFlight := map[string]bool{} // groups with a block running
	idle := []*slot{r.slots[0]}
	var runErr error
	d.first = time.Now()

	for {
		if !d.stop.Load() && ctx.Err() == nil {
			pending, idle = d.startBlocks(ctx, pending, idle, running, inFlight, events)
		}
		if len(running) == 0 {
			break
		}
		ev := <-events
		switch {
		case ev.err != nil:
			if runErr == nil {
				runErr = ev.err
			}
			d.stop.Store(true)
		case ev.end:
			delete(running, ev.slot)
			delete(inFlight, ev.step.Cell.Group)
			idle = append(idle, ev.slot)
		default:
			if err := d.record(ctx, ev, pending); err != nil && runErr == nil {
				runErr = err
				d.stop.Store(true)
			}
		}
	}
	return runErr
}

// replay replays the dispatch of blocks (in schedule order) on this
// machine's admission rule with their predicted loads (plan.BlockEnds)
// and returns the course the run's ETA follows.
func (d *dispatch) replay(blocks []*block, loads []plan.SampleLoad) *progressCurve {
	groups := map[string]int{}
	rb := make([]plan.ReplayBlock, len(blocks))
	for i, b := range blocks {
		g, ok := groups[b.group]
		if !ok {
			g = len(groups)
			groups[b.group] = g
		}
		rb[i] = plan.ReplayBlock{Group: g, Duration: b.est, Load: loads[i]}
	}
	starts, _ := plan.BlockEnds(rb, d.rule, d.ad != nil)
	var ends []sampleEnd
	for i, b := range blocks {
		at := starts[i]
		for _, st := range b.steps {
			w := d.est[st.Cell.Key]
			at += w
			ends = append(ends, sampleEnd{at: at, work: w})
		}
	}
	return newProgressCurve(ends)
}

// startBlocks starts pending blocks on idle testbeds (building testbeds up
// to the parallelism) while the admission rule admits them, and returns
// what is left pending and idle.
func (d *dispatch) startBlocks(ctx context.Context, pending []*block, idle []*slot, running map[*slot]plan.SampleLoad, inFlight map[string]bool, events chan<- event) ([]*block, []*slot) {
	loads := make([]plan.SampleLoad, 0, len(running))
	for _, l := range running {
		loads = append(loads, l)
	}
	kept := pending[:0:0]
	for i, b := range pending {
		if d.ad != nil && d.ad.groups[b.group] != nil && d.ad.groups[b.group].stopped && !b.steps[0].Warmup() {
			continue // its group stopped on its rule: counted out of Planned
		}
		full := len(running) >= d.slots || (len(idle) == 0 && len(d.r.slots) >= d.slots)
		if full {
			return append(kept, pending[i:]...), idle
		}
		if d.ad != nil && inFlight[b.group] {
			kept = append(kept, b) // the rule judges its previous iteration first
			continue
		}
		l := d.blockLoad(b)
		if !d.rule.Admit(loads, l) {
			if l.Exclusive {
				return append(kept, pending[i:]...), idle // it runs alone next
			}
			kept = append(kept, b)
			continue
		}
		k := pickSlot(idle, l.Browser, d.browserSlots() < d.rule.Browsers || d.rule.Browsers <= 0 || len(running) == 0)
		if k == noSlot {
			kept = append(kept, b) // every testbed that may hold a browser is busy
			continue
		}
		if k == newSlot {
			t, err := d.r.newSlot(ctx, len(d.r.slots))
			if err != nil {
				// Go on with the testbeds there are.
				d.slots = len(d.r.slots)
				msg := fmt.Sprintf("testbed %d could not be built (%v): the run goes on with %d", len(d.r.slots), err, d.slots)
				_ = d.r.db.AddRunWarning(context.WithoutCancel(ctx), d.r.runRec.ID, msg)
				fmt.Fprintln(d.r.opts.Log, "quicbench: "+msg)
				d.rule.Slots = d.slots
				return append(kept, pending[i:]...), idle
			}
			idle = append(idle, t)
			k = len(idle) - 1
		}
		t := idle[k]
		idle = slices.Delete(idle, k, k+1)
		t.browser = t.browser || l.Browser
		running[t] = l
		loads = append(loads, l)
		inFlight[b.group] = true
		go d.take(ctx, t, b, events)
	}
	return kept, idle
}

// pickSlot's answers besides an index into idle.
const (
	newSlot = -1 // build a testbed
	noSlot  = -2 // none fits now
)

// pickSlot chooses the idle testbed for a block: for a block in a browser,
// one that already took browser blocks (its browser may still run), else,
// when another testbed may take browsers (more), one that did not; for
// any other block, one that took no browser block, else any. It returns
// newSlot when no idle testbed fits (the caller builds one when the run
// has fewer than its parallelism, as startBlocks checks), and noSlot when
// a browser block must wait for a testbed that holds browsers.
func pickSlot(idle []*slot, browser, more bool) int {
	plain, withBrowser := -1, -1
	for i, t := range idle {
		if t.browser {
			withBrowser = i
		} else {
			plain = i
		}
	}
	switch {
	case browser && withBrowser >= 0:
		return withBrowser
	case browser && !more:
		return noSlot
	case plain >= 0:
		return plain
	case !browser && withBrowser >= 0:
		return withBrowser
	}
	return newSlot
}

// browserSlots counts the testbeds that have taken browser blocks.
func (d *dispatch) browserSlots() int {
	n := 0
	for _, t := range d.r.slots {
		if t.browser {
			n++
		}
	}
	return n
}

// take runs a block's samples on testbed t, reporting each to the
// dispatch, then the block's end.
func (d *dispatch) take(ctx context.Context, t *slot, b *block, events chan<- event) {
	last := b.steps[len(b.steps)-1]
	defer func() {
		t.overhead.idle()
		events <- event{slot: t, step: last, end: true}
	}()
	for _, step := range b.steps {
		if ctx.Err() != nil || d.stop.Load() || !d.admitSample() {
			return
		}
		s, err := t.sample(ctx, step)
		if err != nil {
			if ctx.Err() == nil {
				events <- event{slot: t, step: step, err: err}
			}
			return // the sample in flight is lost, by design
		}
		events <- event{slot: t, step: step, sample: s}
	}
}

// admitSample counts a sample about to start against Options.MaxSamples.
func (d *dispatch) admitSample() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m := d.r.opts.MaxSamples; m > 0 && d.started >= m {
		return false
	}
	d.started++
	return true
}

// blockLoad is the predicted load of a block: its heaviest cell's.
func (d *dispatch) blockLoad(b *block) plan.SampleLoad {
	var out plan.SampleLoad
	for _, s := range b.steps {
		l := d.cellLoad(s.Cell)
		browser := out.Browser || l.Browser
		if l.Exclusive && !out.Exclusive {
			out = l
		}
		if !out.Exclusive && l.CPU > out.CPU {
			out = l
		}
		out.Browser = browser
	}
	return out
}

// cellLoad predicts a cell's sample load: plan.CellLoad until samples of
// the cell were measured, then their mean load (plan.MeasuredLoad: the
// endpoints' processes' CPU with the emulator's share); a cell whose measured load fills
// the machine's budget runs alone from then on. A cell whose load cannot
// be predicted runs alone.
func (d *dispatch) cellLoad(c *model.Cell) plan.SampleLoad {
	l, ok := d.model[c.ID]
	if !ok {
		var err error
		if l, err = plan.CellLoad(c); err != nil {
			l = plan.SampleLoad{CPU: float64(runtime.NumCPU()), Exclusive: true, Reason: err.Error()}
		}
		d.model[c.ID] = l
	}
	if l.Exclusive {
		return l
	}
	if m := d.measured[c.ID]; m != nil && m.n > 0 {
		l.CPU = m.sum / float64(m.n)
		if l.CPU > d.rule.Budget {
			l.Exclusive, l.Reason = true, fmt.Sprintf("its samples measured %.2f CPUs", l.CPU)
		}
	}
	return l
}

// record does the bookkeeping of a stored sample: the summary, the
// measured load, the adaptive rule (whose stop takes the group's pending
// steps out of Planned), the failure streak and the progress line.
func (d *dispatch) record(ctx context.Context, ev event, pending []*block) error {
	s, step, sum := ev.sample, ev.step, d.sum
	sum.Taken++
	d.handled++
	switch s.Status {
	case model.StatusFailed:
		sum.Failed++
	case model.StatusInvalid:
		sum.Invalid++
	}
	sum.Warnings += len(s.Warnings)
	// The endpoints' CPU over the time the sample held its testbed
	// (measured part and overhead), as plan.CellLoad predicts it.
	if held := s.Wall + s.Overhead; s.Status == model.StatusOK && held > 0 && !slices.Contains(s.Warnings, "server CPU time unavailable") {
		cpu := plan.MeasuredLoad(step.Cell.Client, s.CPU.ClientUser+s.CPU.ClientSys, s.CPU.ServerUser+s.CPU.ServerSys, held)
		m := d.measured[step.Cell.ID]
		if m == nil {
			m = &meanOf{}
			d.measured[step.Cell.ID] = m
		}
		m.sum += cpu
		m.n++
	}
	if d.ad != nil {
		if st := d.ad.record(s, step.Cell); st != nil {
			if err := d.r.storeStop(ctx, st); err != nil {
				return err
			}
			for _, b := range pending {
				for _, later := range b.steps {
					if later.Cell.Group == st.Group && !later.Warmup() {
						sum.Planned--
					}
				}
			}
		}
	}
	if err := d.streak.observe(s); err != nil {
		return fmt.Errorf("%w; the run is kept: fix the cause, then quicbench run --resume %s", err, d.r.opts.DB)
	}
	d.overheads = append(d.overheads, stats.OverheadSample{Client: step.Cell.Client, Overhead: s.Overhead, Drain: s.Drain, Prep: s.Prep})
	var left time.Duration
	if d.est != nil {
		d.doneEst += d.est[step.Cell.Key]
		d.remaining -= d.est[step.Cell.Key]
	}
	switch {
	case d.curve != nil:
		left = etaCurve(time.Since(d.first), d.doneEst, d.curve)
	case d.est != nil:
		left = etaFrom(time.Since(d.first), d.doneEst, d.remaining, d.slots)
	default:
		left = etaMean(time.Since(d.first), sum.Taken, d.todo-d.handled)
	}
	d.prog.update(step.Cell.Group, Event{
		Done: sum.Resumed + sum.Taken, Total: sum.Planned, Cell: step.Cell.Key, Iteration: step.Iteration,
		Warmup: step.Warmup(), Protocol: step.Cell.Protocol, Status: string(s.Status), Value: s.Value,
		Unit: step.Cell.Unit, Error: s.Error, Overhead: s.Overhead, Drain: s.Drain, Prep: s.Prep,
		Elapsed: time.Since(d.start), ETA: left, Testbed: s.Slot, Concurrency: s.Concurrency,
	})
	return nil
}
