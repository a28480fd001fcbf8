package firefox

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/model"
)

const (
	// reapLimit bounds the wait for the last Firefox processes to vanish.
	reapLimit = 5 * time.Second
	// serverFile is the file of a profile in which Firefox's remote agent
	// writes where its WebDriver BiDi server listens, once it listens.
	serverFile = "WebDriverBiDiServer.json"
	// ProfilePrefix starts the name of every profile directory a Session
	// makes (in Options.ProfileDir).
	ProfilePrefix = "qb-firefox-"
)

// Session is one running headless Firefox with a fresh profile, kept across
// several page loads so that later loads can reuse its connections. A
// Session is not safe for concurrent use: its loads run one after the other
// in one tab. Close must be called; it kills every Firefox process of the
// session and removes the profile.
type Session struct {
	opts    Options
	dir     string // the profile, removed by Close
	version string // "Firefox/153.7.0"

	cmd     *exec.Cmd
	pgid    int           // Firefox's process group, 0 when it never started
	exited  chan struct{} // closed once Firefox's main process was waited for
	bidi    *bidiConn
	context string         // the tab's browsing context id
	chrome  string         // a chrome window's browsing context (privileged scope)
	live    map[string]any // the live preferences in effect (isLivePref)

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
}

// NewSession starts headless Firefox with a fresh profile under
// opts.ProfileDir (the test CA imported, the session's preferences in its
// user.js), opens a WebDriver BiDi session to it and prepares its tab.
// opts.URL may be empty unless needed to derive the HTTP/3 origin. If ctx
// ends or StartTimeout expires first, the browser is torn down and the
// error is ctx's error or a *browser.TimeoutError.
func NewSession(ctx context.Context, opts Options) (*Session, error) {
	o, cas, err := opts.validate(false)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(o.ProfileDir, ProfilePrefix)
	if err != nil {
		return nil, fmt.Errorf("firefox: creating the profile directory: %w", err)
	}
	s := &Session{opts: o, dir: dir, exited: make(chan struct{}), live: livePrefs(o.prefs())}
	sctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if err := s.start(sctx, cas); err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("firefox: start: %w", ctx.Err())
		case errors.Is(sctx.Err(), context.DeadlineExceeded):
			err = errors.Join(&browser.TimeoutError{Phase: "start", After: o.StartTimeout}, err)
		}
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// start makes the profile, starts Firefox and opens the BiDi session.
func (s *Session) start(ctx context.Context, cas []*x509.Certificate) error {
	if err := s.makeProfile(ctx, cas); err != nil {
		return err
	}
	o := s.opts
	cmd := exec.Command(o.Exe, "--headless", "--no-remote", "--profile", s.dir, "--remote-debugging-port", "0", "--remote-allow-system-access", "about:blank")
	cmd.Env = append(os.Environ(), "MOZ_CRASHREPORTER_DISABLE=1")
	if o.KeyLogFile != "" {
		cmd.Env = append(cmd.Env, "SSLKEYLOGFILE="+o.KeyLogFile)
	}
	if o.Output != nil {
		cmd.Stdout, cmd.Stderr = o.Output, o.Output
	}
	prepareCmd(cmd, o.NetNS)
	if err := cmd.Start(); err != nil {
		close(s.exited)
		return fmt.Errorf("firefox: starting %s: %w", o.Exe, err)
	}
	s.cmd = cmd
	s.pgid = cmd.Process.Pid // Setpgid: the group id is the leader's pid
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(s.exited) }()

	addr, err := s.waitListening(ctx)
	if err != nil {
		select {
		case <-s.exited:
			return fmt.Errorf("firefox: %s exited during its start (%v)", o.Exe, waitErr)
		default:
		}
		return err
	}
	if s.bidi, err = dialBiDi(ctx, "ws://"+addr+"/session", o.NetNS); err != nil {
		return err
	}
	var sess struct {
		Capabilities struct {
			BrowserName    string `json:"browserName"`
			BrowserVersion string `json:"browserVersion"`
		} `json:"capabilities"`
	}
	caps := map[string]any{"alwaysMatch": map[string]any{"acceptInsecureCerts": o.AcceptInsecureCerts}}
	if err := s.bidi.call(ctx, "session.new", map[string]any{"capabilities": caps}, &sess); err != nil {
		return err
	}
	s.version = "Firefox/" + sess.Capabilities.BrowserVersion
	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	if err := s.bidi.call(ctx, "browsingContext.getTree", map[string]any{"maxDepth": 0}, &tree); err != nil {
		return err
	}
	if len(tree.Contexts) == 0 {
		return errors.New("firefox: the browser has no tab")
	}
	s.context = tree.Contexts[0].Context
	// Sites may have more than the default 250 resource timing entries.
	if err := s.bidi.call(ctx, "script.addPreloadScript", map[string]any{
		"functionDeclaration": "() => { performance.setResourceTimingBufferSize(100000); }",
	}, nil); err != nil {
		return err
	}
	if err := s.bidi.call(ctx, "browsingContext.setViewport", map[string]any{
		"context":  s.context,
		"viewport": map[string]int{"width": browser.WindowWidth, "height": browser.WindowHeight},
	}, nil); err != nil {
		return err
	}
	if o.DisableCache {
		if err := s.bidi.call(ctx, "network.setCacheBehavior", map[string]any{"cacheBehavior": "bypass"}, nil); err != nil {
			return err
		}
	}
	return nil
}

// makeProfile writes the profile: an NSS database that trusts cas for TLS
// servers (when there are any) and user.js with the session's preferences.
func (s *Session) makeProfile(ctx context.Context, cas []*x509.Certificate) error {
	if len(cas) > 0 {
		db := "sql:" + s.dir
		if err := certutil(ctx, "-N", "-d", db, "--empty-password"); err != nil {
			return err
		}
		for i, c := range cas {
			name := filepath.Join(s.dir, "quicbench-ca-"+strconv.Itoa(i+1)+".pem")
			if err := os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), 0o600); err != nil {
				return fmt.Errorf("firefox: writing the CA: %w", err)
			}
			if err := certutil(ctx, "-A", "-d", db, "-n", "quicbench-ca-"+strconv.Itoa(i+1), "-t", "C,,", "-i", name); err != nil {
				return err
			}
		}
	}
	js, err := userJS(s.opts.prefs())
	if err != nil {
		return fmt.Errorf("firefox: preferences: %w", err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "user.js"), []byte(js), 0o600); err != nil {
		return fmt.Errorf("firefox: writing user.js: %w", err)
	}
	return nil
}

// certutil runs NSS's certutil with args.
func certutil(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "certutil", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("firefox: certutil %v: %w: %s", args, err, out)
	}
	return nil
}

// prepareCmd puts Firefox into its own process group (so that Close can
// kill it with all its children), kills it if the Go program dies, and
// runs it through nsenter when a network namespace is asked for (nsenter
// execs Firefox in place: the pid and the process group stay the same).
func prepareCmd(cmd *exec.Cmd, netns string) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if netns != "" {
		nsenter, _ := exec.LookPath("nsenter")
		cmd.Args = append([]string{nsenter, "--net=" + netns, "--"}, cmd.Args...)
		cmd.Path = nsenter
		cmd.Err = nil
	}
}

// waitListening waits until Firefox's remote agent has written where its
// BiDi server listens, and returns that host:port.
func (s *Session) waitListening(ctx context.Context) (string, error) {
	name := filepath.Join(s.dir, serverFile)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(name); err == nil {
			var v struct {
				Host string `json:"ws_host"`
				Port int    `json:"ws_port"`
			}
			if json.Unmarshal(b, &v) == nil && v.Host != "" && v.Port > 0 {
				return net.JoinHostPort(v.Host, strconv.Itoa(v.Port)), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("firefox: waiting for the WebDriver BiDi server: %w", ctx.Err())
		case <-s.exited:
			return "", errors.New("firefox: exited")
		case <-tick.C:
		}
	}
}

// Version is the browser's product and version as the BiDi session
// reports it, e.g. "Firefox/153.7.0".
func (s *Session) Version() string { return s.version }

// Close ends the browser: it closes the BiDi connection, kills Firefox's
// process group (SIGKILL: the throwaway profile needs no orderly shutdown,
// which would add about half a second to every sample), waits until no
// process of the group remains, and removes the profile directory. It is
// safe to call more than once; later calls return the first result.
func (s *Session) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.teardown() })
	return s.closeErr
}

func (s *Session) teardown() error {
	s.closed.Store(true)
	if s.bidi != nil {
		s.bidi.close()
	}
	var errs []error
	if s.pgid > 0 {
		_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
		select {
		case <-s.exited:
		case <-time.After(reapLimit):
			errs = append(errs, fmt.Errorf("firefox: process %d did not end within %v of SIGKILL", s.pgid, reapLimit))
		}
		if err := browser.ReapGroup(s.pgid, reapLimit); err != nil {
			errs = append(errs, err)
		}
	}
	if err := browser.RemoveAllRetry(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("firefox: removing the profile %s: %w", s.dir, err))
	}
	return errors.Join(errs...)
}

// Load starts a browser with a fresh profile, loads opts.URL once, and
// closes the browser again (on every path: success, error, ctx cancel,
// timeout). See Session.Load for the result and the errors.
func Load(ctx context.Context, opts Options) (*browser.Result, error) {
	return once(ctx, opts, func(s *Session, url string) (*browser.Result, error) { return s.Load(ctx, url) })
}

// once starts a browser with a fresh profile for opts (whose URL must be
// set), runs f with it and opts.URL, and closes the browser again on every
// path, joining a failed close to f's error.
func once[T any](ctx context.Context, opts Options, f func(s *Session, url string) (T, error)) (T, error) {
	var zero T
	o, _, err := opts.validate(true)
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

// pageContext checks that the session is open and that pageURL fits its
// protocol (op names the caller in the error), and returns the context
// that bounds a page's load and measurement: Options.Timeout.
func (t tab) pageContext(ctx context.Context, op, pageURL string) (context.Context, context.CancelFunc, error) {
	if t.s.closed.Load() {
		return nil, nil, errClosed
	}
	if err := browser.CheckURL(pageURL, t.opts.Protocol); err != nil {
		return nil, nil, fmt.Errorf("firefox: %s: URL: %w", op, err)
	}
	lctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	return lctx, cancel, nil
}

// goTo navigates the tab to pageURL and waits for its load event.
func (t tab) goTo(ctx context.Context, pageURL string) error {
	return t.s.bidi.call(ctx, "browsingContext.navigate", map[string]any{
		"context": t.id, "url": pageURL, "wait": "complete",
	}, nil)
}

// measureJS wraps browser.CollectJS: its value as JSON, with what Firefox
// reports of the document's response that CollectJS does not read.
const measureJS = `(async () => {
  const collected = await ` + browser.CollectJS + `;
  const nav = performance.getEntriesByType('navigation')[0];
  return JSON.stringify({
    collected,
    status: nav && nav.responseStatus ? nav.responseStatus : 0,
    reused: nav ? nav.connectEnd === nav.connectStart : false,
  });
})()`

// measured is measureJS's value.
type measured struct {
	Collected json.RawMessage `json:"collected"`
	Status    int64           `json:"status"`
	Reused    bool            `json:"reused"`
}

// Load navigates the session's tab to pageURL, waits for the load event,
// and returns the page's measurements in the Result of package browser,
// with the same metrics (Result.Metrics) as Chromium's. Firefox does not
// expose the TLS version and cipher to BiDi or the page: Negotiated has
// the ALPN and HTTP version of the document (its nextHopProtocol) only.
// Status is the navigation entry's responseStatus, and ConnectionReused is
// true when the document's connection needed no connect (connectEnd equal
// to connectStart). Errors, as package browser's:
//   - *browser.ProtocolMismatchError, returned with the complete Result,
//     when any resource used another protocol than the session's (for h3:
//     Firefox fell back to TCP);
//   - *browser.IncompleteLoadError, returned with the Result, when the
//     load event had not ended browser.LoadEventWait after the navigation;
//   - *browser.TimeoutError when the page did not load within
//     Options.Timeout;
//   - *browser.NavigationError when Firefox failed the navigation (its
//     error text, e.g. "NS_ERROR_CONNECTION_REFUSED");
//   - ctx's error when ctx ended first.
func (s *Session) Load(ctx context.Context, pageURL string) (*browser.Result, error) {
	if err := s.ownPrefs(ctx); err != nil {
		return nil, err
	}
	return s.tab().load(ctx, pageURL)
}

// ownPrefs restores the session's own live preferences (its protocol's)
// when a UserContext of another protocol changed them.
func (s *Session) ownPrefs(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	pctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	return s.setLivePrefs(pctx, s.opts)
}

// tab is a top-level browsing context the driver measures in: the
// session's own tab, or the tab of one of its UserContexts.
type tab struct {
	s    *Session
	id   string  // the browsing context id
	opts Options // Protocol and Timeout of its loads
}

// tab returns the session's own tab.
func (s *Session) tab() tab { return tab{s: s, id: s.context, opts: s.opts} }

// load is Session.Load in tab t.
func (t tab) load(ctx context.Context, pageURL string) (*browser.Result, error) {
	lctx, cancel, err := t.pageContext(ctx, "Load", pageURL)
	if err != nil {
		return nil, err
	}
	defer cancel()

	started := time.Now()
	err = t.goTo(lctx, pageURL)
	var m measured
	if err == nil {
		m, err = t.measure(lctx)
	}
	wall := time.Since(started)
	if err != nil {
		err = t.loadError(ctx, lctx, pageURL, err)
		// Leave the tab idle for a later load.
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		_ = t.s.bidi.call(sctx, "browsingContext.navigate", map[string]any{"context": t.id, "url": "about:blank", "wait": "none"}, nil)
		scancel()
		return nil, err
	}
	res, err := browser.ParseCollected(m.Collected, t.opts.Protocol)
	if err != nil {
		return nil, fmt.Errorf("firefox: %s: %w", pageURL, err)
	}
	res.Version = t.s.version
	res.Wall = wall
	res.Status = m.Status
	if alpn := res.Resources[0].Protocol; browser.HTTPVersion(alpn) != "" {
		res.Negotiated = model.Negotiated{ALPN: alpn, HTTPVersion: browser.HTTPVersion(alpn)}
	}
	res.ConnectionReused = m.Reused
	if err := res.Check(); err != nil {
		return res, err
	}
	return res, nil
}

// measure runs measureJS in the tab.
func (t tab) measure(ctx context.Context) (measured, error) {
	var m measured
	v, err := t.evaluate(ctx, measureJS)
	if err != nil {
		var se *scriptError
		if errors.As(err, &se) {
			return m, fmt.Errorf("firefox: reading the page's timings: %s", se.text)
		}
		return m, err
	}
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return m, fmt.Errorf("firefox: decoding the page's timings: %w", err)
	}
	return m, nil
}

// loadError turns a failed navigation into package browser's typed errors.
func (t tab) loadError(ctx, lctx context.Context, pageURL string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("firefox: loading %s: %w", pageURL, ctx.Err())
	}
	if errors.Is(lctx.Err(), context.DeadlineExceeded) {
		return &browser.TimeoutError{Phase: "load", URL: pageURL, After: t.opts.Timeout}
	}
	var ce *CommandError
	if errors.As(err, &ce) && ce.Method == "browsingContext.navigate" {
		return &browser.NavigationError{URL: pageURL, ErrorText: ce.Message}
	}
	return fmt.Errorf("firefox: loading %s: %w", pageURL, err)
}
