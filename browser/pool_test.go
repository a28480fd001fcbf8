package browser

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeBrowser is a PooledBrowser without a process: its group id names it
// in the fake usage readings.
type fakeBrowser struct {
	pgid    int
	dead    error // Alive's answer
	hung    bool  // Ping waits for its context
	closed  int
	samples int
	// pingDies makes the next Ping end the browser with this error (a
	// kill the driver sees only then)
	pingDies error
}

func (f *fakeBrowser) Alive() error { return f.dead }
func (f *fakeBrowser) Ping(ctx context.Context) error {
	if f.pingDies != nil {
		f.dead = fmt.Errorf("gone: %w", f.pingDies)
		return f.pingDies
	}
	if f.hung {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}
func (f *fakeBrowser) ProcessGroup() int { return f.pgid }
func (f *fakeBrowser) Close() error      { f.closed++; return nil }

// fakeHost is what the fake browsers use: PSS, open files (40 unless
// set) and CPU per process group.
type fakeHost struct {
	pss     map[int]int64
	fds     map[int]int
	cpu     map[int]CPUTime
	started []*fakeBrowser
}

func newFakePool(t *testing.T, max int) (*Pool[*fakeBrowser], *fakeHost) {
	t.Helper()
	h := &fakeHost{pss: map[int]int64{}, fds: map[int]int{}, cpu: map[int]CPUTime{}}
	p := NewPool[*fakeBrowser](PoolOptions{
		MaxBrowsers: max,
		PingLimit:   20 * time.Millisecond,
		Usage: func(pgid int) (Usage, error) {
			if _, ok := h.pss[pgid]; !ok {
				return Usage{}, errors.New("no such group")
			}
			fds, ok := h.fds[pgid]
			if !ok {
				fds = 40
			}
			return Usage{Procs: 3, PSS: h.pss[pgid], RSS: 2 * h.pss[pgid], FDs: fds, CPU: h.cpu[pgid]}, nil
		},
		CPU: func(pgid int) (CPUTime, error) {
			if _, ok := h.pss[pgid]; !ok {
				return CPUTime{}, errors.New("no such group")
			}
			return h.cpu[pgid], nil
		},
	})
	return p, h
}

// spec is a sample of key whose run adds cpu to its browser's group and
// returns err.
func (h *fakeHost) spec(key string, cpu time.Duration, err error) SampleSpec[*fakeBrowser] {
	return SampleSpec[*fakeBrowser]{
		Key: key,
		Start: func(context.Context) (*fakeBrowser, error) {
			b := &fakeBrowser{pgid: 1000 + len(h.started)}
			h.started = append(h.started, b)
			h.pss[b.pgid] = 200 << 20
			return b, nil
		},
		Run: func(_ context.Context, b *fakeBrowser, fresh bool) error {
			b.samples++
			c := h.cpu[b.pgid]
			h.cpu[b.pgid] = CPUTime{User: c.User + cpu, Sys: c.Sys}
			return err
		},
	}
}

// TestPoolKeepsAndReplaces: a key's browser serves its samples until it
// dies, hangs or holds more than the memory or open-files limit, when it is closed and
// replaced before the next sample, which says why; a browser that ends or
// hangs during a sample is closed, and the sample says so.
func TestPoolKeepsAndReplaces(t *testing.T) {
	p, h := newFakePool(t, 4)
	ctx := context.Background()
	run := func(spec SampleSpec[*fakeBrowser]) SampleReport {
		t.Helper()
		rep, err := p.Run(ctx, spec)
		if err != nil && spec.Run(ctx, &fakeBrowser{}, false) == nil {
			t.Fatalf("run: %v", err)
		}
		return rep
	}
	r1 := run(h.spec("h2", 300*time.Millisecond, nil))
	r2 := run(h.spec("h2", 200*time.Millisecond, nil))
	if len(h.started) != 1 || r1.Samples != 1 || r2.Samples != 2 || r1.Start <= 0 || r2.Start != 0 {
		t.Fatalf("two samples of one key: %d browsers started, reports %+v, %+v", len(h.started), r1, r2)
	}
	if r2.CPU.User != 200*time.Millisecond || r2.CPUErr != nil || r2.Usage.PSS != 200<<20 || r2.UsageErr != nil {
		t.Errorf("second sample: CPU %+v (%v), usage %+v (%v)", r2.CPU, r2.CPUErr, r2.Usage, r2.UsageErr)
	}
	if w := r2.Warnings(); len(w) != 0 {
		t.Errorf("warnings of a kept browser: %q", w)
	}

	// dead between samples
	h.started[0].dead = errors.New("browser: the browser is gone")
	r := run(h.spec("h2", 0, nil))
	if len(h.started) != 2 || h.started[0].closed != 1 || r.Samples != 1 || !strings.Contains(r.Replaced, "had ended") {
		t.Errorf("after a death: %d started, closed %d, report %+v", len(h.started), h.started[0].closed, r)
	}
	if w := r.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "browser restarted before the sample: the previous browser had ended") {
		t.Errorf("warnings %q", w)
	}

	// hung between samples: the ping's limit
	h.started[1].hung = true
	r = run(h.spec("h2", 0, nil))
	if len(h.started) != 3 || !strings.Contains(r.Replaced, "did not answer within 20ms") {
		t.Errorf("after a hang: %d started, report %+v", len(h.started), r)
	}

	// memory over the limit (the default, then one of the sample's)
	h.pss[h.started[2].pgid] = DefaultMemoryLimit + 1
	r = run(h.spec("h2", 0, nil))
	if len(h.started) != 4 || !strings.Contains(r.Replaced, "over the limit of 1024 MB") {
		t.Errorf("over the default limit: %d started, report %+v", len(h.started), r)
	}
	s := h.spec("h2", 0, nil)
	s.MemoryLimit = 100 << 20
	r = run(s)
	if len(h.started) != 5 || !strings.Contains(r.Replaced, "held 200 MB") || !strings.Contains(r.Replaced, "limit of 100 MB") {
		t.Errorf("over the sample's limit: %d started, report %+v", len(h.started), r)
	}
	s.MemoryLimit = -1 // no limit
	h.pss[h.started[4].pgid] = 1 << 40
	if r = run(s); len(h.started) != 5 || r.Replaced != "" {
		t.Errorf("without a limit: %d started, report %+v", len(h.started), r)
	}
	h.pss[h.started[4].pgid] = 200 << 20

	// open files over the limit (the default, then the sample's); a
	// browser at the limit stays
	h.fds[h.started[4].pgid] = DefaultFileLimit
	if r = run(h.spec("h2", 0, nil)); len(h.started) != 5 || r.Replaced != "" {
		t.Errorf("at the default open-files limit: %d started, report %+v", len(h.started), r)
	}
	h.fds[h.started[4].pgid] = DefaultFileLimit + 1
	r = run(h.spec("h2", 0, nil))
	if len(h.started) != 6 || h.started[4].closed != 1 || !strings.Contains(r.Replaced, "held 2049 open files (its 3 processes together) after 3 samples, over the limit of 2048") {
		t.Errorf("over the default open-files limit: %d started, report %+v", len(h.started), r)
	}
	s = h.spec("h2", 0, nil)
	s.FileLimit = 100
	h.fds[h.started[5].pgid] = 101
	if r = run(s); len(h.started) != 7 || !strings.Contains(r.Replaced, "over the limit of 100") {
		t.Errorf("over the sample's open-files limit: %d started, report %+v", len(h.started), r)
	}
	s.FileLimit, s.MemoryLimit = -1, -1 // no limits
	h.fds[h.started[6].pgid] = 1 << 20
	if r = run(s); len(h.started) != 7 || r.Replaced != "" {
		t.Errorf("without limits: %d started, report %+v", len(h.started), r)
	}
	h.fds[h.started[6].pgid] = 40

	// broken during the sample: it ended; it hung closing its context
	b := h.started[6]
	s = h.spec("h2", 0, errors.New("load failed"))
	s.Run = func(context.Context, *fakeBrowser, bool) error {
		b.dead = errors.New("gone")
		return errors.New("load failed")
	}
	rep, err := p.Run(ctx, s)
	if err == nil || !strings.Contains(rep.Broken, "it ended (gone)") || b.closed != 1 || rep.UsageErr == nil || p.Len() != 0 {
		t.Errorf("died during the sample: err %v, report %+v, closed %d, kept %d", err, rep, b.closed, p.Len())
	}
	s = h.spec("h2", 0, nil)
	s.Run = func(context.Context, *fakeBrowser, bool) error {
		return &TimeoutError{Phase: "context close", After: contextCloseLimit}
	}
	rep, _ = p.Run(ctx, s)
	if !strings.Contains(rep.Broken, "did not answer") || p.Len() != 0 || h.started[7].closed != 1 {
		t.Errorf("hung closing its context: report %+v, kept %d", rep, p.Len())
	}
	if w := rep.Warnings(); len(w) != 1 || !strings.HasPrefix(w[0], "browser failed during the sample and was closed: it did not answer") {
		t.Errorf("warnings %q", w)
	}
	// a load that timed out does not condemn a browser that answers
	rep, _ = p.Run(ctx, h.spec("h2", 0, &TimeoutError{Phase: "load", After: time.Second}))
	if rep.Broken != "" || p.Len() != 1 {
		t.Errorf("a load timeout: report %+v, kept %d", rep, p.Len())
	}
	// a load timeout joined before the context close's timeout does not
	// hide it
	s = h.spec("h2", 0, errors.Join(&TimeoutError{Phase: "load", After: time.Second}, &TimeoutError{Phase: "context close", After: contextCloseLimit}))
	rep, _ = p.Run(ctx, s)
	if !strings.Contains(rep.Broken, "it did not answer (browser: context close timed out") || p.Len() != 0 {
		t.Errorf("load and close timed out: report %+v, kept %d", rep, p.Len())
	}
	// a failed sample whose browser no longer answers (stopped during the
	// load, its context's close failing otherwise than by a timeout)
	s = h.spec("h2", 0, nil)
	s.Run = func(_ context.Context, b *fakeBrowser, _ bool) error {
		b.hung = true
		return errors.Join(&TimeoutError{Phase: "load", After: time.Second}, errors.New("detaching from the target: context deadline exceeded"))
	}
	rep, _ = p.Run(ctx, s)
	if !strings.Contains(rep.Broken, "it did not answer within 20ms after the sample failed") || p.Len() != 0 {
		t.Errorf("hung during the sample: report %+v, kept %d", rep, p.Len())
	}
}

// TestPoolKilledJustBefore: a browser killed just before a sample, whose
// driver has not yet seen it end (Alive nil) but whose ping fails as it
// ends, is reported as ended, not as hung.
func TestPoolKilledJustBefore(t *testing.T) {
	p, h := newFakePool(t, 4)
	ctx := context.Background()
	if _, err := p.Run(ctx, h.spec("h2", 0, nil)); err != nil {
		t.Fatal(err)
	}
	b := h.started[0]
	b.pingDies = errors.New("browser process exited: signal: killed")
	rep, err := p.Run(ctx, h.spec("h2", 0, nil))
	if err != nil || len(h.started) != 2 || !strings.Contains(rep.Replaced, "the previous browser had ended (gone: browser process exited: signal: killed)") {
		t.Errorf("killed just before: %v, %d started, report %+v", err, len(h.started), rep)
	}
}

// TestPoolLimitsBrowsers: at most MaxBrowsers are kept; the least recently
// used is closed to make room, and Close ends them all.
func TestPoolLimitsBrowsers(t *testing.T) {
	p, h := newFakePool(t, 2)
	ctx := context.Background()
	for _, key := range []string{"h1", "h2", "h1", "h3", "h1"} {
		if _, err := p.Run(ctx, h.spec(key, 0, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// h1 and h2 started; h1 used again; h3 evicts h2 (least recent); h1 kept
	if len(h.started) != 3 || h.started[1].closed != 1 || h.started[0].closed != 0 || h.started[0].samples != 3 || p.Len() != 2 {
		t.Errorf("started %d, closed h1 %d h2 %d, h1 samples %d, kept %d", len(h.started), h.started[0].closed, h.started[1].closed, h.started[0].samples, p.Len())
	}
	if err := p.Close(); err != nil || p.Len() != 0 || h.started[0].closed != 1 || h.started[2].closed != 1 {
		t.Errorf("Close: %v, kept %d", err, p.Len())
	}
}

// TestPoolClosesIdleBrowsers: a kept browser unused for IdleClose is
// closed at the next sample, whatever its key; one used within it is kept.
func TestPoolClosesIdleBrowsers(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &fakeHost{pss: map[int]int64{}, cpu: map[int]CPUTime{}}
	p := NewPool[*fakeBrowser](PoolOptions{
		IdleClose: 2 * time.Minute, Now: func() time.Time { return now },
		Usage: func(pgid int) (Usage, error) { return Usage{PSS: h.pss[pgid]}, nil },
		CPU:   func(int) (CPUTime, error) { return CPUTime{}, nil },
	})
	ctx := context.Background()
	for _, step := range []struct {
		key     string
		advance time.Duration
	}{{"h1", 0}, {"h2", time.Minute}, {"h2", 90 * time.Second}} {
		now = now.Add(step.advance)
		if _, err := p.Run(ctx, h.spec(step.key, 0, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// h1 was last used 2.5 min before the third sample: closed then; h2 kept.
	if len(h.started) != 2 || h.started[0].closed != 1 || h.started[1].closed != 0 || p.Len() != 1 {
		t.Errorf("started %d, closed h1 %d h2 %d, kept %d", len(h.started), h.started[0].closed, h.started[1].closed, p.Len())
	}
}

// TestPoolAlways: browser_restart always starts and closes a browser per
// sample, in which the sample runs itself (fresh), and keeps nothing.
func TestPoolAlways(t *testing.T) {
	p, h := newFakePool(t, 4)
	for range 2 {
		s := h.spec("h2", 0, nil)
		s.Restart = RestartAlways
		var fresh bool
		run := s.Run
		s.Run = func(ctx context.Context, b *fakeBrowser, f bool) error { fresh = f; return run(ctx, b, f) }
		rep, err := p.Run(context.Background(), s)
		if err != nil || !fresh || rep.Samples != 1 || rep.Start <= 0 || rep.UsageErr == nil || rep.CPUErr != nil {
			t.Errorf("always: err %v, fresh %v, report %+v", err, fresh, rep)
		}
	}
	if len(h.started) != 2 || h.started[0].closed != 1 || h.started[1].closed != 1 || p.Len() != 0 {
		t.Errorf("always: %d started, kept %d", len(h.started), p.Len())
	}
}
