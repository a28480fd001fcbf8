package browser

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// contextCloseLimit bounds Context.Close: closing the tab and disposing of
// its browser context takes a few DevTools round trips (under 0.2 s
// here); a browser that does not answer within it is hung. It is generous
// because a false alarm costs a browser restart: on the shared machine,
// at a load average of 70 on 2 cores, 5 s was exceeded.
const contextCloseLimit = 15 * time.Second

// Context is one isolated browser context of a running Session, with one
// tab: what Chromium calls a browser context (an incognito profile) made
// over DevTools with Target.createBrowserContext (disposeOnDetach). It
// has its own network context: its own connections (socket pools and QUIC
// sessions), TLS session cache, HTTP cache (in memory), Alt-Svc and other
// server properties, cookies and storage; nothing of it is shared with the
// session's tab or with other Contexts, and Close disposes of all of it.
// A persistent Session gives each sample a fresh Context instead of a
// fresh browser.
//
// What a Context cannot change are the browser's command-line switches:
// the protocol control (--disable-quic, --disable-http2,
// --origin-to-force-quic-on) holds for the whole process, so a Context
// measures the protocol of its Session (Options.LaunchKey tells which
// Options can share a Session).
//
// A Context is not safe for concurrent use; distinct Contexts of one
// Session are.
type Context struct {
	s      *Session
	tab    tab
	cancel context.CancelFunc

	closeOnce sync.Once
	closeErr  error
}

// ErrBrowserGone is returned (wrapped) by Session.NewContext when the
// browser process has ended or its DevTools connection is lost.
var ErrBrowserGone = errors.New("the browser is gone")

// Alive returns nil while the session's browser runs and answers over its
// DevTools pipe as far as the driver knows: a crashed or killed browser
// ends the pipe at once. A hung browser still looks alive; the time limits
// of NewContext, the loads and Context.Close find it.
func (s *Session) Alive() error {
	if s.closed.Load() {
		return errors.New("browser: the session is closed")
	}
	if err := s.bctx.Err(); err != nil {
		return fmt.Errorf("browser: %w (its DevTools connection ended)", ErrBrowserGone)
	}
	return nil
}

// Ping asks the browser for its version over DevTools: a browser that
// does not answer before ctx ends is hung.
func (s *Session) Ping(ctx context.Context) error {
	if err := s.Alive(); err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(s.bctx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	_, err := chromedp.Run(pctx, func(ctx context.Context, t *chromedp.Target) (cdpbrowser.GetVersionResult, error) {
		return chromedp.CallBrowser(ctx, cdpbrowser.GetVersion, cdp.Empty{})
	})
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ProcessGroup is the process group of the session's browser (every
// Chromium process of it), 0 when it never started.
func (s *Session) ProcessGroup() int { return s.pgid }

// NewContext creates a fresh browser context with one tab in the running
// browser and prepares the tab as NewSession prepares its own (the
// Resource Timing buffer, the HTTP cache off with opts.DisableCache). opts
// are the sample's options: they must launch the same browser as the
// session's (the same LaunchKey), and give the Context's Protocol (that
// of the session), Timeout and DisableCache. The creation is bounded by
// opts.StartTimeout: a browser that does not answer within it returns a
// *TimeoutError (Phase "context") and should be closed.
func (s *Session) NewContext(ctx context.Context, opts Options) (*Context, error) {
	if err := s.Alive(); err != nil {
		return nil, err
	}
	o, err := opts.validate(false)
	if err != nil {
		return nil, err
	}
	if o.launchKey() != s.opts.launchKey() {
		return nil, &OptionError{Field: "Protocol", Err: fmt.Errorf("the options launch another browser than the session's (protocol %s, session %s): a Context cannot change the browser's switches", o.Protocol, s.opts.Protocol)}
	}
	cctx, cancel := chromedp.NewContext(s.bctx, chromedp.WithNewBrowserContext())
	c := &Context{s: s, cancel: cancel, tab: tab{ctx: cctx, opts: o, want: s.want, version: s.version}}
	done := make(chan error, 1)
	// The first action on the new chromedp context creates the browser
	// context and its tab, and attaches to it; it runs on cctx, which the
	// target's life is bound to, so the limit is kept here.
	go func() { done <- prepareTab(cctx, o) }()
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case err = <-done:
		if err != nil {
			err = fmt.Errorf("browser: creating a browser context: %w", err)
		}
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = &TimeoutError{Phase: "context", After: o.StartTimeout}
	}
	if err != nil {
		// Dispose of whatever was made; a hung browser would hold the
		// cancel, so it runs aside (closing the browser ends it).
		go cancel()
		return nil, err
	}
	return c, nil
}

// Load is Session.Load in the Context's tab.
func (c *Context) Load(ctx context.Context, pageURL string) (*Result, error) {
	if err := c.usable("Load"); err != nil {
		return nil, err
	}
	return c.tab.load(ctx, pageURL)
}

// Bench is Session.Bench in the Context's tab.
func (c *Context) Bench(ctx context.Context, pageURL, expr string) ([]byte, error) {
	if err := c.usable("Bench"); err != nil {
		return nil, err
	}
	return c.tab.bench(ctx, pageURL, expr)
}

func (c *Context) usable(op string) error {
	if c.tab.ctx.Err() != nil {
		return fmt.Errorf("browser: %s on a closed Context", op)
	}
	return c.s.Alive()
}

// Close closes the Context's tab and disposes of its browser context
// (Target.closeTarget, then Target.disposeBrowserContext): every
// connection, cache and session ticket of it goes with it. A browser that
// does not finish that within 15 s returns a *TimeoutError (Phase
// "context close"): it is hung and should be closed. Safe to call more
// than once; later calls return the first result.
func (c *Context) Close() error {
	c.closeOnce.Do(func() {
		done := make(chan error, 1)
		go func() { done <- chromedp.Cancel(c.tab.ctx) }()
		timer := time.NewTimer(contextCloseLimit)
		defer timer.Stop()
		select {
		case err := <-done:
			if err != nil && c.s.Alive() == nil {
				c.closeErr = fmt.Errorf("browser: closing the browser context: %w", err)
			}
		case <-timer.C:
			c.closeErr = &TimeoutError{Phase: "context close", After: contextCloseLimit}
		}
	})
	return c.closeErr
}

// LaunchKey identifies the browser process that o starts: its executable,
// namespace, profile parent and every command-line switch (protocol
// control, certificate hashes, features, DevTools port). Options with the
// same LaunchKey can share one Session, each sample in a Context of its
// own; per-load options (URL but for its QUIC origin, Timeout,
// DisableCache, Output) do not change it. The error is that of invalid
// options (an *OptionError).
func (o Options) LaunchKey() (string, error) {
	v, err := o.validate(false)
	if err != nil {
		return "", err
	}
	return v.launchKey(), nil
}

// launchKey is LaunchKey of validated options.
func (o Options) launchKey() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exe=%s\x00netns=%s\x00profiles=%s", o.Exe, o.NetNS, o.ProfileDir)
	for _, a := range o.args() {
		fmt.Fprintf(&b, "\x00--%v=%v", a[0], a[1])
	}
	for _, a := range slices.Sorted(slices.Values(o.portArgs())) {
		b.WriteString("\x00" + a)
	}
	return b.String()
}
