package browser

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

const (
	// closeGrace is how long Close waits for Browser.close to end the
	// browser before it kills the process group.
	closeGrace = 3 * time.Second
	// reapLimit bounds the wait for the last Chromium processes to vanish.
	reapLimit = 5 * time.Second
)

// Session is one running headless Chromium with a fresh profile, kept across
// several page loads so that later loads can reuse its connections (and its
// Alt-Svc cache). A Session is not safe for concurrent use: its loads run one
// after the other in one tab. Close must be called; it ends every Chromium
// process of the session and removes the profile.
type Session struct {
	opts    Options
	want    string // expected nextHopProtocol
	dir     string // the --user-data-dir, removed by Close
	version string // Browser.getVersion product, e.g. "Chrome/156.0.8078.79"

	allocCancel context.CancelFunc
	bctx        context.Context // chromedp context owning the browser and its tab
	bcancel     context.CancelFunc
	cmd         *exec.Cmd // set by the allocator before it starts Chromium
	pgid        int       // process group of Chromium, 0 when it never started

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// ProfilePrefix starts the name of every profile directory a Session
// makes (in Options.ProfileDir).
const ProfilePrefix = "qb-chromium-"

// NewSession starts headless Chromium with a fresh profile under
// opts.ProfileDir, attaches to its first tab and returns once the tab
// answers. opts.URL may be empty unless needed to derive the QUIC origin.
// If ctx ends or StartTimeout expires first, the browser is torn down and
// the error is ctx's error or a *TimeoutError.
func NewSession(ctx context.Context, opts Options) (*Session, error) {
	o, err := opts.validate(false)
	if err != nil {
		return nil, err
	}
	want, _ := NextHopProtocol(o.Protocol)
	dir, err := os.MkdirTemp(o.ProfileDir, ProfilePrefix)
	if err != nil {
		return nil, fmt.Errorf("browser: creating the profile directory: %w", err)
	}
	s := &Session{opts: o, want: want, dir: dir}

	out := o.Output
	if out == nil {
		out = io.Discard
	}
	logf := func(format string, args ...any) { fmt.Fprintf(out, "chromedp: "+format+"\n", args...) }

	allocOpts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(o.Exe),
		chromedp.UserDataDir(dir),
		chromedp.CombinedOutput(out),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			// Passed behind chromedp's back: as one of its flags, a
			// DevTools port would make it drop the pipe for a WebSocket.
			cmd.Args = append(cmd.Args, o.portArgs()...)
			prepareCmd(cmd, o.NetNS)
			s.cmd = cmd
		}),
	}
	for _, a := range o.args() {
		allocOpts = append(allocOpts, chromedp.Flag(a[0].(string), a[1]))
	}
	// The browser lives until Close, whatever happens to ctx: Close must
	// still be able to send Browser.close over DevTools.
	base := context.WithoutCancel(ctx)
	actx, acancel := chromedp.NewExecAllocator(base, allocOpts...)
	s.allocCancel = acancel
	s.bctx, s.bcancel = chromedp.NewContext(actx,
		chromedp.WithLogf(logf), chromedp.WithErrorf(logf),
		chromedp.WithBrowserOption(chromedp.WithBrowserLogf(logf), chromedp.WithBrowserErrorf(logf)))

	started := make(chan error, 1)
	go func() { started <- s.setup() }()
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	setupDone := false
	select {
	case err = <-started:
		setupDone = true
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = &TimeoutError{Phase: "start", After: o.StartTimeout}
	}
	if err != nil {
		// Stop the start in progress (the cancel blocks until Chromium's
		// main process is reaped, which can wait for its output pipe, so
		// it runs aside), kill the process group, then clean up.
		stopped := make(chan struct{})
		go func() { s.bcancel(); close(stopped) }()
		if !setupDone {
			<-started
		}
		s.notePID()
		s.killGroup()
		<-stopped
		return nil, errors.Join(err, s.Close())
	}
	s.notePID()
	return s, nil
}

// prepareCmd puts Chromium into its own process group (so that Close can
// kill it with all its children), kills it if the Go program dies, and runs
// it through nsenter when a network namespace is asked for.
func prepareCmd(cmd *exec.Cmd, netns string) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if netns != "" {
		// nsenter execs Chromium in place, so the pid, the process group and
		// the inherited DevTools pipes stay the same.
		nsenter, _ := exec.LookPath("nsenter")
		cmd.Args = append([]string{nsenter, "--net=" + netns, "--"}, cmd.Args...)
		cmd.Path = nsenter
		cmd.Err = nil
	}
}

// setup starts the browser (chromedp's first Run), reads its version and
// prepares the tab for measurements.
func (s *Session) setup() error {
	// The first Run starts the browser and attaches to its tab.
	v, err := chromedp.Run(s.bctx, func(ctx context.Context, t *chromedp.Target) (cdpbrowser.GetVersionResult, error) {
		return chromedp.CallBrowser(ctx, cdpbrowser.GetVersion, cdp.Empty{})
	})
	if err != nil {
		return fmt.Errorf("browser: starting %s: %w", s.opts.Exe, err)
	}
	s.version = v.Product
	if err := prepareTab(s.bctx, s.opts); err != nil {
		return fmt.Errorf("browser: preparing the tab: %w", err)
	}
	return nil
}

// prepareTab readies the tab of chromedp context ctx for measurements: a
// larger Resource Timing buffer in every document, and the HTTP cache off
// with opts.DisableCache. Its first call on a new chromedp context creates
// (and attaches to) the context's target.
func prepareTab(ctx context.Context, opts Options) error {
	steps := []chromedp.Action[chromedp.Void]{
		// Sites may have more than the default 250 resource timing entries.
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, page.AddScriptToEvaluateOnNewDocument,
				page.AddScriptToEvaluateOnNewDocumentParams{Source: "performance.setResourceTimingBufferSize(100000);"})
			return err
		}),
	}
	if opts.DisableCache {
		steps = append(steps, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
			return err
		}))
	}
	return chromedp.Do(ctx, steps...)
}

// notePID records Chromium's process group. It must run after setup has
// returned: the allocator started the command (if at all) before that.
func (s *Session) notePID() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.pgid = s.cmd.Process.Pid // Setpgid: the group id is the leader's pid
	}
}

// killGroup sends SIGKILL to Chromium's process group.
func (s *Session) killGroup() {
	if s.pgid > 0 {
		_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
	}
}

// Version is the browser's product string as reported over DevTools, e.g.
// "Chrome/156.0.8078.79" (Debian chromium 156 in headless=new mode).
func (s *Session) Version() string { return s.version }

// DevToolsPort returns the TCP port on 127.0.0.1 (in the browser's network
// namespace) where Chromium serves DevTools, for a session started with
// Options.RemoteDebugging. Chromium picks the port and writes it into the
// profile's DevToolsActivePort file, which is read here.
func (s *Session) DevToolsPort() (int, error) {
	if !s.opts.RemoteDebugging {
		return 0, errors.New("browser: DevToolsPort: the session was started without Options.RemoteDebugging")
	}
	if s.closed.Load() {
		return 0, errors.New("browser: DevToolsPort: the session is closed")
	}
	name := filepath.Join(s.dir, "DevToolsActivePort")
	// The file is written when the port listens, before the first tab
	// answers (NewSession waited for that); a short grace covers a slow
	// file system.
	deadline := time.Now().Add(2 * time.Second)
	for {
		port, err := readActivePort(name)
		if err == nil || time.Now().After(deadline) {
			return port, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readActivePort parses Chromium's DevToolsActivePort file: the port on
// the first line, the browser target's path on the second.
func readActivePort(name string) (int, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, fmt.Errorf("browser: DevTools port: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	port, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || port < 1 || port > 65535 {
		return 0, fmt.Errorf("browser: DevTools port: %s: first line %q is not a port", name, first)
	}
	return port, nil
}

// Close ends the browser: Browser.close over DevTools, then SIGKILL to its
// process group, a wait until no process of this profile remains, and the
// removal of the profile directory. It is safe to call more than once; later
// calls return the first result.
func (s *Session) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.teardown() })
	return s.closeErr
}

func (s *Session) teardown() error {
	s.closed.Store(true)
	if c := chromedp.FromContext(s.bctx); c != nil && c.Browser != nil && s.bctx.Err() == nil {
		// Graceful close: Browser.close, then wait (bounded) for the exit.
		cctx, cancel := context.WithTimeout(s.bctx, closeGrace)
		_ = chromedp.Cancel(cctx)
		cancel()
	}
	// Children can outlive the main process: kill the whole group.
	s.killGroup()
	// Ends the chromedp context (SIGKILL to the main process if still
	// alive) and waits until the main process has been reaped.
	s.bcancel()
	s.allocCancel()
	var errs []error
	if err := reap(s.dir, s.pgid, reapLimit); err != nil {
		errs = append(errs, err)
	}
	reapOrphans(s.pgid)
	if err := removeAllRetry(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("browser: removing the profile %s: %w", s.dir, err))
	}
	return errors.Join(errs...)
}

// removeAllRetry removes dir; a dying child may still create files in it
// for a moment, so it tries again briefly.
func removeAllRetry(dir string) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := os.RemoveAll(dir)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Load starts a browser with a fresh profile, loads opts.URL once, and
// closes the browser again (on every path: success, error, ctx cancel,
// timeout). See Session.Load for the result and the errors.
func Load(ctx context.Context, opts Options) (*Result, error) {
	return once(ctx, opts, func(s *Session, url string) (*Result, error) { return s.Load(ctx, url) })
}

// once starts a browser with a fresh profile for opts (whose URL must be
// set), runs f with it and opts.URL, and closes the browser again on every
// path, joining a failed close to f's error.
func once[T any](ctx context.Context, opts Options, f func(s *Session, url string) (T, error)) (T, error) {
	var zero T
	o, err := opts.validate(true)
	if err != nil {
		return zero, err
	}
	s, err := NewSession(ctx, o)
	if err != nil {
		return zero, err
	}
	out, err := f(s, o.URL)
	if cerr := s.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return out, err
}

// Load navigates the session's tab to pageURL, waits for the load event,
// and returns the page's measurements. Errors:
//   - *ProtocolMismatchError, returned with the complete Result, when any
//     resource used another protocol than the session's;
//   - *IncompleteLoadError, returned with the Result, when the load event
//     had not ended LoadEventWait after the navigation;
//   - *TimeoutError when the page did not load within Options.Timeout (the
//     navigation is stopped; the session stays usable);
//   - *NavigationError when Chromium failed the navigation itself;
//   - ctx's error when ctx ended first.
func (s *Session) Load(ctx context.Context, pageURL string) (*Result, error) {
	if s.closed.Load() {
		return nil, errors.New("browser: Load on a closed Session")
	}
	return s.tab().load(ctx, pageURL)
}

// tab is a page target the driver measures in: the session's own tab, or
// the tab of one of its Contexts.
type tab struct {
	ctx     context.Context // the chromedp context of the target
	opts    Options         // Protocol, Timeout of its loads
	want    string          // expected nextHopProtocol
	version string          // the browser's product
}

// tab returns the session's own tab.
func (s *Session) tab() tab {
	return tab{ctx: s.bctx, opts: s.opts, want: s.want, version: s.version}
}

// load is Session.Load in tab t.
func (t tab) load(ctx context.Context, pageURL string) (*Result, error) {
	if err := checkURL(pageURL, t.opts.Protocol); err != nil {
		return nil, fmt.Errorf("browser: Load: URL: %w", err)
	}
	lctx, cancel := context.WithTimeout(t.ctx, t.opts.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	started := time.Now()
	resp, err := chromedp.Run(lctx, chromedp.NavigateResponse(pageURL))
	var raw *rawResult
	if err == nil {
		raw, err = chromedp.Run(lctx, chromedp.Evaluate[*rawResult](collectJS, chromedp.EvalAwaitPromise))
	}
	wall := time.Since(started)
	if err != nil {
		err = t.loadError(ctx, lctx, pageURL, err)
		// Leave the tab idle for a later load (or a clean close).
		sctx, scancel := context.WithTimeout(t.ctx, time.Second)
		_ = chromedp.Do(sctx, chromedp.Stop())
		scancel()
		return nil, err
	}
	if raw == nil || raw.Nav == nil {
		return nil, fmt.Errorf("browser: %s: the page has no navigation timing entry", pageURL)
	}
	res := raw.result(t.want, resp)
	res.Version = t.version
	res.Wall = wall
	if err := res.check(); err != nil {
		return res, err
	}
	return res, nil
}

// loadError turns a failed navigation into the package's typed errors.
func (t tab) loadError(ctx, lctx context.Context, pageURL string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("browser: loading %s: %w", pageURL, ctx.Err())
	}
	if errors.Is(lctx.Err(), context.DeadlineExceeded) {
		return &TimeoutError{Phase: "load", URL: pageURL, After: t.opts.Timeout}
	}
	var le *chromedp.LoadError
	if errors.As(err, &le) {
		return &NavigationError{URL: pageURL, ErrorText: le.ErrorText}
	}
	return fmt.Errorf("browser: loading %s: %w", pageURL, err)
}
