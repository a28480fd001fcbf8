package firefox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quicbench/quicbench/browser"
)

// contextCloseLimit bounds UserContext.Close; a browser that does not
// finish within it is hung. Generous, as package browser's: a false alarm
// costs a restart (Firefox took more than 5 s at a load average of 70).
const contextCloseLimit = 15 * time.Second

// UserContext is one WebDriver BiDi user context of a running Session
// (browser.createUserContext: what Firefox calls a container), with one
// tab. Firefox keys its connection pool, TLS session and QUIC token
// caches, HTTP cache, Alt-Svc mappings, cookies and storage by the user
// context, so nothing of a UserContext is shared with the session's tab
// or with other UserContexts. Close removes it (browser.removeUserContext,
// which clears its data), and then closes the idle connections it left:
// unlike Chromium's browser contexts, a removed user context's connections
// stay in Firefox's pool until their idle timeout, and would otherwise
// send their closing packets across the link during a later sample (see
// Session.closeIdleConnections).
//
// A UserContext cannot change the profile's preferences: it measures the
// protocol of its Session (Options.LaunchKey tells which Options can
// share a Session). It is not safe for concurrent use.
type UserContext struct {
	s   *Session
	id  string // the user context
	tab tab

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// ErrBrowserGone is returned (wrapped) by Session.NewContext when Firefox
// has exited or its BiDi connection is lost.
var ErrBrowserGone = errors.New("the browser is gone")

// Alive returns nil while Firefox runs and its BiDi connection holds, as
// far as the driver knows. A hung Firefox still looks alive; the time
// limits of NewContext, the loads and UserContext.Close find it.
func (s *Session) Alive() error {
	if s.closed.Load() {
		return errClosed
	}
	select {
	case <-s.exited:
		return fmt.Errorf("firefox: %w (its process exited)", ErrBrowserGone)
	default:
	}
	if s.bidi == nil {
		return fmt.Errorf("firefox: %w (no BiDi connection)", ErrBrowserGone)
	}
	select {
	case <-s.bidi.done:
		return fmt.Errorf("firefox: %w (its BiDi connection ended)", ErrBrowserGone)
	default:
	}
	return nil
}

// Ping asks Firefox for its status over BiDi (session.status): a browser
// that does not answer before ctx ends is hung.
func (s *Session) Ping(ctx context.Context) error {
	if err := s.Alive(); err != nil {
		return err
	}
	return s.bidi.call(ctx, "session.status", map[string]any{}, nil)
}

// ProcessGroup is the process group of the session's Firefox (every
// process of it), 0 when it never started.
func (s *Session) ProcessGroup() int { return s.pgid }

// NewContext creates a fresh user context with one tab in the running
// Firefox, with the session's viewport, and the HTTP cache bypassed with
// opts.DisableCache. opts are the sample's options: they must launch the
// same browser as the session's (the same LaunchKey), and give the
// context's Timeout. The creation is bounded by opts.StartTimeout: a
// browser that does not answer within it returns a *browser.TimeoutError
// (Phase "context") and should be closed.
func (s *Session) NewContext(ctx context.Context, opts Options) (*UserContext, error) {
	if err := s.Alive(); err != nil {
		return nil, err
	}
	o, _, err := opts.validate(false)
	if err != nil {
		return nil, err
	}
	if o.launchKey() != s.opts.launchKey() {
		return nil, &OptionError{Field: "Protocol", Err: fmt.Errorf("the options launch another browser than the session's (protocol %s, session %s): a user context cannot change the profile's preferences", o.Protocol, s.opts.Protocol)}
	}
	cctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	u := &UserContext{s: s}
	err = s.setLivePrefs(cctx, o)
	if err == nil {
		err = u.create(cctx, o)
	}
	if err != nil {
		if ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
			err = errors.Join(&browser.TimeoutError{Phase: "context", After: o.StartTimeout}, err)
		}
		if u.id != "" {
			// Remove what was made, unless the browser does not answer
			// (closing it removes everything).
			rctx, rcancel := context.WithTimeout(context.Background(), contextCloseLimit)
			_ = s.bidi.call(rctx, "browser.removeUserContext", map[string]any{"userContext": u.id}, nil)
			rcancel()
		}
		return nil, err
	}
	return u, nil
}

// create makes the user context and its tab.
func (u *UserContext) create(ctx context.Context, o Options) error {
	s := u.s
	var uc struct {
		UserContext string `json:"userContext"`
	}
	if err := s.bidi.call(ctx, "browser.createUserContext", map[string]any{}, &uc); err != nil {
		return err
	}
	if uc.UserContext == "" {
		return errors.New("firefox: browser.createUserContext returned no user context")
	}
	u.id = uc.UserContext
	var bc struct {
		Context string `json:"context"`
	}
	if err := s.bidi.call(ctx, "browsingContext.create", map[string]any{"type": "tab", "userContext": u.id}, &bc); err != nil {
		return err
	}
	if bc.Context == "" {
		return errors.New("firefox: browsingContext.create returned no browsing context")
	}
	u.tab = tab{s: s, id: bc.Context, opts: o}
	if err := s.bidi.call(ctx, "browsingContext.setViewport", map[string]any{
		"context":  bc.Context,
		"viewport": map[string]int{"width": browser.WindowWidth, "height": browser.WindowHeight},
	}, nil); err != nil {
		return err
	}
	if o.DisableCache {
		if err := s.bidi.call(ctx, "network.setCacheBehavior", map[string]any{"cacheBehavior": "bypass", "contexts": []string{bc.Context}}, nil); err != nil {
			return err
		}
	}
	return nil
}

// Load is Session.Load in the user context's tab.
func (u *UserContext) Load(ctx context.Context, pageURL string) (*browser.Result, error) {
	if err := u.usable(); err != nil {
		return nil, err
	}
	return u.tab.load(ctx, pageURL)
}

// Bench is Session.Bench in the user context's tab.
func (u *UserContext) Bench(ctx context.Context, pageURL, expr string) ([]byte, error) {
	if err := u.usable(); err != nil {
		return nil, err
	}
	return u.tab.bench(ctx, pageURL, expr)
}

func (u *UserContext) usable() error {
	if u.closed.Load() {
		return errors.New("firefox: the user context is closed")
	}
	return u.s.Alive()
}

// Close removes the user context (its tab and its data) and closes the
// idle connections it left in Firefox's pool. A browser that does not
// finish within 15 s returns a *browser.TimeoutError (Phase "context
// close"): it is hung and should be closed. Safe to call more than once;
// later calls return the first result.
func (u *UserContext) Close() error {
	u.closeOnce.Do(func() {
		u.closed.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), contextCloseLimit)
		defer cancel()
		err := u.s.bidi.call(ctx, "browser.removeUserContext", map[string]any{"userContext": u.id}, nil)
		if err == nil {
			err = u.s.closeIdleConnections(ctx)
		}
		switch {
		case err == nil:
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			u.closeErr = &browser.TimeoutError{Phase: "context close", After: contextCloseLimit}
		case u.s.Alive() != nil:
			// The browser died: nothing is left to close.
		default:
			u.closeErr = fmt.Errorf("firefox: closing the user context: %w", err)
		}
	})
	return u.closeErr
}

// LaunchKey identifies the Firefox that o starts: its executable,
// namespace, profile parent, trusted CAs, capabilities and the
// preferences of its profile but the live ones (isLivePref: those that
// choose the HTTP version, which NewContext sets in the running browser).
// Options with the same LaunchKey can share one Session, each sample in a
// UserContext of its own, whatever their protocol; per-load options (URL,
// Timeout, Output) do not change it. The error is that of invalid options
// (an *OptionError).
func (o Options) LaunchKey() (string, error) {
	v, _, err := o.validate(false)
	if err != nil {
		return "", err
	}
	return v.launchKey(), nil
}

// launchKey is LaunchKey of validated options.
func (o Options) launchKey() string {
	var b strings.Builder
	fmt.Fprintf(&b, "exe=%s\x00netns=%s\x00profiles=%s\x00insecure=%v\x00ca=%x", o.Exe, o.NetNS, o.ProfileDir, o.AcceptInsecureCerts, o.CAPEM)
	p := o.prefs()
	for _, k := range slices.Sorted(maps.Keys(p)) {
		if !isLivePref(k) {
			fmt.Fprintf(&b, "\x00%s=%v", k, p[k])
		}
	}
	return b.String()
}

// isLivePref reports whether preference name is one NewContext sets in a
// running Firefox for the sample's protocol: network.http.http2.enabled
// and the network.http.http3.* preferences. Firefox's HTTP handler reads
// them whenever they change, and they act on connections made afterwards
// (measured: HTTP/3 on, off, and HTTP/2 off in one browser gave h3, h2,
// then http/1.1 loads); the idle connections of earlier samples are
// closed when their user context is (UserContext.Close), and the
// per-resource protocol check catches any load that did not follow.
func isLivePref(name string) bool {
	return name == "network.http.http2.enabled" || strings.HasPrefix(name, "network.http.http3.")
}

// livePrefs are the live preferences (isLivePref) of prefs.
func livePrefs(prefs map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range prefs {
		if isLivePref(k) {
			out[k] = v
		}
	}
	return out
}

// setLivePrefs makes the running browser's live preferences those of o,
// in its privileged scope (Services.prefs), when they differ from the
// current ones: those o sets are set, the others cleared to Firefox's
// defaults.
func (s *Session) setLivePrefs(ctx context.Context, o Options) error {
	want := livePrefs(o.prefs())
	if maps.Equal(want, s.live) {
		return nil
	}
	js, err := prefsScript(s.live, want)
	if err != nil {
		return err
	}
	if _, err := s.chromeEval(ctx, js); err != nil {
		return fmt.Errorf("firefox: setting the protocol's preferences: %w", err)
	}
	s.live = want
	return nil
}

// prefsScript is the privileged script that turns preferences from into
// want: it sets every preference of want and clears the others of from.
func prefsScript(from, want map[string]any) (string, error) {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(want)) {
		name, _ := json.Marshal(k)
		v, err := json.Marshal(want[k])
		if err != nil {
			return "", err
		}
		switch want[k].(type) {
		case bool:
			fmt.Fprintf(&b, "Services.prefs.setBoolPref(%s, %s);\n", name, v)
		case int:
			fmt.Fprintf(&b, "Services.prefs.setIntPref(%s, %s);\n", name, v)
		case string:
			fmt.Fprintf(&b, "Services.prefs.setStringPref(%s, %s);\n", name, v)
		default:
			return "", fmt.Errorf("preference %s: value %v (%T) is not a string, bool or int", k, want[k], want[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(from)) {
		if _, ok := want[k]; !ok {
			name, _ := json.Marshal(k)
			fmt.Fprintf(&b, "Services.prefs.clearUserPref(%s);\n", name)
		}
	}
	b.WriteString(`"ok"`)
	return b.String(), nil
}

// closeIdleConnections closes the connections Firefox keeps idle in its
// pool (net:prune-all-connections), and forgets the origins for which it
// gave HTTP/3 up (network:reset-http3-excluded-list): Firefox keeps that
// list for the whole browser, not per user context, so one h3 sample that
// fell back to TCP would otherwise send every later one to TCP too.
func (s *Session) closeIdleConnections(ctx context.Context) error {
	_, err := s.chromeEval(ctx, `Services.obs.notifyObservers(null, "net:prune-all-connections");
Services.obs.notifyObservers(null, "network:reset-http3-excluded-list");
"ok"`)
	return err
}

// chromeEval evaluates expr in the browser's privileged (chrome) scope.
func (s *Session) chromeEval(ctx context.Context, expr string) (string, error) {
	if s.chrome == "" {
		var tree struct {
			Contexts []struct {
				Context string `json:"context"`
			} `json:"contexts"`
		}
		if err := s.bidi.call(ctx, "browsingContext.getTree", map[string]any{"maxDepth": 0, "moz:scope": "chrome"}, &tree); err != nil {
			return "", err
		}
		if len(tree.Contexts) == 0 {
			return "", errors.New("firefox: no chrome window")
		}
		s.chrome = tree.Contexts[0].Context
	}
	return tab{s: s, id: s.chrome}.evaluate(ctx, expr)
}
