package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Restart policies of a Pool: Options of the plan field browser_restart.
const (
	// RestartAuto keeps one browser per LaunchKey across samples and gives
	// every sample a fresh isolated context in it ("" means the same).
	RestartAuto = "auto"
	// RestartAlways starts a fresh browser (and profile) for every sample
	// and closes it after the sample.
	RestartAlways = "always"
)

// RestartPolicies lists the valid restart policies.
var RestartPolicies = []string{RestartAuto, RestartAlways}

// Defaults of PoolOptions.
const (
	// DefaultMemoryLimit is the proportional set size of a kept browser's
	// processes above which a Pool restarts it before its next sample.
	// Chromium with one context measured 250-400 MB here, Firefox
	// 300-450 MB (docs/metrics.md, "Persistent browsers").
	DefaultMemoryLimit = 1 << 30
	// DefaultFileLimit is how many open files a kept browser's processes
	// may hold together before a Pool restarts it before its next sample.
	// Chromium with one context held 320-530 here, Firefox 400-450 when
	// it starts; the 2-hour soak of 28 Nov 2026 saw Firefox's count grow
	// by up to 150 an hour (docs/metrics.md, "Persistent browsers"), which
	// this bounds to about 11 hours of samples per browser.
	DefaultFileLimit = 2048
	// DefaultMaxBrowsers is how many browsers a Pool keeps at once: a
	// Chromium for each of h1, h2 and h3 (the protocol switches are
	// process-wide) and a Firefox.
	DefaultMaxBrowsers = 4
	// DefaultIdleClose is how long a kept browser may go unused before a
	// Pool closes it (at its next sample): a testbed runs one cell group's
	// block at a time, and a browser of a client or protocol it no longer
	// measures would hold its memory (150-330 MB of PSS here) for nothing.
	DefaultIdleClose = 5 * time.Minute
	// DefaultPingLimit bounds the liveness check of a kept browser before
	// each sample: a browser that does not answer a trivial request within
	// it is hung.
	DefaultPingLimit = 3 * time.Second
)

// PooledBrowser is a running browser a Pool keeps across samples: a
// *Session, or a *firefox.Session.
type PooledBrowser interface {
	// Alive returns nil while the browser runs and its connection holds.
	Alive() error
	// Ping asks the browser for something trivial, to find a hung one.
	Ping(ctx context.Context) error
	// ProcessGroup is the process group of the browser's processes.
	ProcessGroup() int
	// Close ends the browser and removes its profile.
	Close() error
}

// PoolOptions configure a Pool.
type PoolOptions struct {
	// MaxBrowsers is the most browsers kept at once (the least recently
	// used is closed to make room); 0 means DefaultMaxBrowsers.
	MaxBrowsers int
	// Usage reads a process group's usage, CPU its CPU time alone; nil
	// means GroupUsage and GroupCPU (tests inject fakes).
	Usage func(pgid int) (Usage, error)
	CPU   func(pgid int) (CPUTime, error)
	// PingLimit bounds the liveness check of a kept browser before each
	// sample; 0 means DefaultPingLimit.
	PingLimit time.Duration
	// IdleClose closes, at the start of a sample, the kept browsers
	// unused for that long; 0 means DefaultIdleClose, negative never.
	IdleClose time.Duration
	// Now is the clock of IdleClose; nil means time.Now.
	Now func() time.Time
}

// Pool keeps running browsers across samples, one per LaunchKey, and
// restarts one that died, hangs or grew past its memory or open-files
// limit (see Run).
// It is safe for concurrent use; samples run one at a time.
type Pool[B PooledBrowser] struct {
	opts PoolOptions
	mu   sync.Mutex
	kept []*keptBrowser[B] // least recently used first
}

type keptBrowser[B PooledBrowser] struct {
	key      string
	b        B
	samples  int       // samples taken, the running one included
	lastUsed time.Time // when its latest sample ended
}

// NewPool returns an empty Pool.
func NewPool[B PooledBrowser](opts PoolOptions) *Pool[B] {
	if opts.MaxBrowsers <= 0 {
		opts.MaxBrowsers = DefaultMaxBrowsers
	}
	if opts.Usage == nil {
		opts.Usage = GroupUsage
	}
	if opts.CPU == nil {
		opts.CPU = GroupCPU
	}
	if opts.PingLimit <= 0 {
		opts.PingLimit = DefaultPingLimit
	}
	if opts.IdleClose == 0 {
		opts.IdleClose = DefaultIdleClose
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Pool[B]{opts: opts}
}

// SampleSpec says how one sample uses a Pool.
type SampleSpec[B PooledBrowser] struct {
	// Key is the LaunchKey of the sample's options: a kept browser of the
	// same key serves it.
	Key string
	// Restart is RestartAuto ("") or RestartAlways.
	Restart string
	// MemoryLimit is the proportional set size (bytes) of a kept
	// browser's processes above which it is restarted before the sample;
	// 0 means DefaultMemoryLimit, negative no limit.
	MemoryLimit int64
	// FileLimit is how many open files a kept browser's processes may
	// hold together before it is restarted before the sample; 0 means
	// DefaultFileLimit, negative no limit.
	FileLimit int
	// Start starts a browser for the sample's options.
	Start func(ctx context.Context) (B, error)
	// Run takes the sample in browser b: with RestartAuto in a fresh
	// context it creates and closes itself (returning the context's
	// errors: a *TimeoutError of phase "context" or "context close" says
	// the browser hangs); with RestartAlways in b itself.
	Run func(ctx context.Context, b B, fresh bool) error
}

// SampleReport says what a sample did with the pool's browsers.
type SampleReport struct {
	// Start is how long starting a browser took in this sample (0 when a
	// kept browser served it).
	Start time.Duration
	// Replaced says why a kept browser was closed and a new one started
	// before this sample: it had ended, did not answer, or held more
	// memory or open files than the limits ("" when none was).
	Replaced string
	// Broken says what happened to the browser during the sample: it
	// ended, or hung; the pool closed it ("" when nothing did).
	Broken string
	// Samples is how many samples the browser has taken, this one
	// included (1 for a fresh browser).
	Samples int
	// Usage is the usage of the browser's processes after the sample;
	// UsageErr why it could not be read (always set with RestartAlways
	// and for a broken browser: it is closed).
	Usage    Usage
	UsageErr error
	// CPU is the CPU time the browser's processes spent on the sample:
	// with RestartAuto from after the browser's (re)start until after
	// the context's close, with RestartAlways over the browser's whole
	// life. CPUErr says why it could not be read.
	CPU    CPUTime
	CPUErr error
}

// Warnings are the sample's warnings about its browser: a replaced
// browser, a broken one.
func (r SampleReport) Warnings() []string {
	var w []string
	if r.Replaced != "" {
		w = append(w, "browser restarted before the sample: "+r.Replaced)
	}
	if r.Broken != "" {
		w = append(w, "browser failed during the sample and was closed: "+r.Broken)
	}
	return w
}

// Run takes one sample. It first closes the kept browsers unused for
// IdleClose. With RestartAlways it starts a browser, runs the sample in it
// and closes it, as a browser per sample always did. With RestartAuto it
// takes the kept browser of spec.Key, after checking that it still runs
// (Alive), answers within PingLimit (Ping) and holds at most
// spec.MemoryLimit of memory and spec.FileLimit open files, and otherwise
// closes it and starts a new one (the report's Replaced says why); it
// starts one when none is kept, closing the least recently used browser
// when MaxBrowsers are kept. After the sample, a browser that ended or
// hung (spec.Run's error holds a *TimeoutError of phase "context" or
// "context close", or, after any other error, the browser does not answer
// a Ping within PingLimit) is closed and the report's Broken says why. The
// error is that of spec.Start or spec.Run.
func (p *Pool[B]) Run(ctx context.Context, spec SampleSpec[B]) (SampleReport, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var rep SampleReport
	p.closeIdle()
	if spec.Restart == RestartAlways {
		return p.runFresh(ctx, spec)
	}
	e := p.find(spec.Key)
	if e != nil {
		if why := p.unfit(ctx, e, spec.MemoryLimit, spec.FileLimit); why != "" {
			rep.Replaced = why
			p.drop(e)
			e = nil
		}
	}
	if e == nil {
		for len(p.kept) >= p.opts.MaxBrowsers {
			p.drop(p.kept[0])
		}
		t0 := time.Now()
		b, err := spec.Start(ctx)
		rep.Start = time.Since(t0)
		if err != nil {
			return rep, err
		}
		e = &keptBrowser[B]{key: spec.Key, b: b, lastUsed: p.opts.Now()}
		p.kept = append(p.kept, e)
	}
	p.touch(e)
	e.samples++
	rep.Samples = e.samples
	cpu0, err0 := p.cpu()
	err := spec.Run(ctx, e.b, false)
	e.lastUsed = p.opts.Now()
	why := brokenBy(e.b, err)
	if why == "" && err != nil {
		why = p.answersAfter(ctx, e.b)
	}
	if why != "" {
		rep.Broken = why
		p.drop(e)
	} else {
		rep.Usage, rep.UsageErr = p.opts.Usage(e.b.ProcessGroup())
	}
	if rep.Broken != "" {
		rep.UsageErr = errors.New("the browser was closed")
	}
	cpu1, err1 := p.cpu()
	rep.CPU, rep.CPUErr = cpu1.Sub(cpu0), errors.Join(err0, err1)
	return rep, err
}

// runFresh is Run with RestartAlways.
func (p *Pool[B]) runFresh(ctx context.Context, spec SampleSpec[B]) (SampleReport, error) {
	rep := SampleReport{Samples: 1, UsageErr: errors.New("the browser was closed after the sample")}
	cpu0, err0 := childrenCPU()
	t0 := time.Now()
	b, err := spec.Start(ctx)
	rep.Start = time.Since(t0)
	if err == nil {
		err = spec.Run(ctx, b, true)
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	cpu1, err1 := childrenCPU()
	rep.CPU, rep.CPUErr = cpu1.Sub(cpu0), errors.Join(err0, err1)
	return rep, err
}

// unfit says why kept browser e may not take the next sample, "" when it
// may.
func (p *Pool[B]) unfit(ctx context.Context, e *keptBrowser[B], limit int64, files int) string {
	if err := e.b.Alive(); err != nil {
		return fmt.Sprintf("the previous browser had ended (%v)", err)
	}
	pctx, cancel := context.WithTimeout(ctx, p.opts.PingLimit)
	err := e.b.Ping(pctx)
	cancel()
	if err != nil && ctx.Err() == nil {
		if aerr := e.b.Alive(); aerr != nil {
			// it ended as it was asked (killed just before the sample)
			return fmt.Sprintf("the previous browser had ended (%v)", aerr)
		}
		return fmt.Sprintf("the previous browser did not answer within %v (%v)", p.opts.PingLimit, err)
	}
	if limit == 0 {
		limit = DefaultMemoryLimit
	}
	if files == 0 {
		files = DefaultFileLimit
	}
	if limit < 0 && files < 0 {
		return ""
	}
	u, err := p.opts.Usage(e.b.ProcessGroup())
	switch {
	case err != nil:
		return ""
	case limit > 0 && u.PSS > limit:
		return fmt.Sprintf("the previous browser held %d MB (proportional set size of its %d processes) after %d samples, over the limit of %d MB",
			u.PSS>>20, u.Procs, e.samples, limit>>20)
	case files > 0 && u.FDs > files:
		return fmt.Sprintf("the previous browser held %d open files (its %d processes together) after %d samples, over the limit of %d",
			u.FDs, u.Procs, e.samples, files)
	}
	return ""
}

// brokenBy says how the sample's error (or the browser's state after it)
// shows a browser that must be closed: it ended, or did not answer.
func brokenBy(b PooledBrowser, err error) string {
	if aerr := b.Alive(); aerr != nil {
		return fmt.Sprintf("it ended (%v)", aerr)
	}
	if te := hungBy(err); te != nil {
		return fmt.Sprintf("it did not answer (%v)", te)
	}
	return ""
}

// hungBy returns the *TimeoutError of phase "context" or "context close"
// anywhere in err's tree (a load's timeout joined before it, as a failed
// load and its context's close are, does not hide it), or nil.
func hungBy(err error) *TimeoutError {
	switch e := err.(type) {
	case nil:
		return nil
	case *TimeoutError:
		if e.Phase == "context" || e.Phase == "context close" {
			return e
		}
		return nil
	case interface{ Unwrap() []error }:
		for _, u := range e.Unwrap() {
			if te := hungBy(u); te != nil {
				return te
			}
		}
		return nil
	case interface{ Unwrap() error }:
		return hungBy(e.Unwrap())
	}
	return nil
}

// answersAfter checks, after a sample that failed without a sign of a
// broken browser, that the browser still answers within PingLimit (a
// browser stopped during a load times the load out, and its context's
// close may then fail in other ways than a timeout); it says why the
// browser must be closed, "" when it answers.
func (p *Pool[B]) answersAfter(ctx context.Context, b B) string {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.PingLimit)
	err := b.Ping(pctx)
	cancel()
	switch {
	case err == nil:
		return ""
	case b.Alive() != nil:
		return fmt.Sprintf("it ended (%v)", b.Alive())
	}
	return fmt.Sprintf("it did not answer within %v after the sample failed (%v)", p.opts.PingLimit, err)
}

// closeIdle closes the kept browsers unused for IdleClose.
func (p *Pool[B]) closeIdle() {
	if p.opts.IdleClose < 0 {
		return
	}
	now := p.opts.Now()
	for _, e := range slices.Clone(p.kept) {
		if now.Sub(e.lastUsed) >= p.opts.IdleClose {
			p.drop(e)
		}
	}
}

func (p *Pool[B]) find(key string) *keptBrowser[B] {
	for _, e := range p.kept {
		if e.key == key {
			return e
		}
	}
	return nil
}

// touch makes e the most recently used.
func (p *Pool[B]) touch(e *keptBrowser[B]) {
	p.kept = slices.DeleteFunc(p.kept, func(x *keptBrowser[B]) bool { return x == e })
	p.kept = append(p.kept, e)
}

// drop closes e and forgets it (a failed close is of no consequence to
// the samples: the processes are killed and reaped either way).
func (p *Pool[B]) drop(e *keptBrowser[B]) {
	p.kept = slices.DeleteFunc(p.kept, func(x *keptBrowser[B]) bool { return x == e })
	_ = e.b.Close()
}

// Close closes every kept browser, all at once (the client agent closes
// them as it exits, and the runner gives it a few seconds).
func (p *Pool[B]) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(p.kept))
	var wg sync.WaitGroup
	for i, e := range p.kept {
		wg.Go(func() { errs[i] = e.b.Close() })
	}
	wg.Wait()
	p.kept = nil
	return errors.Join(errs...)
}

// Len is the number of kept browsers.
func (p *Pool[B]) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.kept)
}

// cpu is the CPU time of every kept browser's processes (live and not yet
// reaped) plus that of this process's waited-for children: the processes
// of closed browsers. A process counts in exactly one of the two at any
// time, so the difference of two readings is the CPU the browsers spent
// in between.
func (p *Pool[B]) cpu() (CPUTime, error) {
	total, err := childrenCPU()
	if err != nil {
		return CPUTime{}, err
	}
	for _, e := range p.kept {
		if cpu, err := p.opts.CPU(e.b.ProcessGroup()); err == nil {
			total = total.Add(cpu)
		}
	}
	return total, nil
}

// childrenCPU is this process's RUSAGE_CHILDREN user and system time.
func childrenCPU() (CPUTime, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return CPUTime{}, err
	}
	return CPUTime{User: time.Duration(ru.Utime.Nano()), Sys: time.Duration(ru.Stime.Nano())}, nil
}

// SelfUsage is the usage of the calling process (the client agent).
func SelfUsage() (Usage, error) { return ProcessUsage(os.Getpid()) }
