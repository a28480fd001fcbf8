package firefox

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Bench starts a browser with a fresh profile, loads opts.URL (quicbench's
// bench page), evaluates expr there, and closes the browser again on every
// path. See Session.Bench.
func Bench(ctx context.Context, opts Options, expr string) ([]byte, error) {
	return once(ctx, opts, func(s *Session, url string) ([]byte, error) { return s.Bench(ctx, url, expr) })
}

// Bench navigates the session's tab to pageURL, waits for the load event,
// then evaluates expr (a promise of a string: the page's JSON result,
// workload.BenchResultJS) and returns that string. The page does the
// measuring; the whole, load and evaluation, must end within
// Options.Timeout. Errors are those of Session.Load (a navigation or
// timeout error), or the script's exception.
func (s *Session) Bench(ctx context.Context, pageURL, expr string) ([]byte, error) {
	if err := s.ownPrefs(ctx); err != nil {
		return nil, err
	}
	return s.tab().bench(ctx, pageURL, expr)
}

// bench is Session.Bench in tab t.
func (t tab) bench(ctx context.Context, pageURL, expr string) ([]byte, error) {
	lctx, cancel, err := t.pageContext(ctx, "Bench", pageURL)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := t.goTo(lctx, pageURL); err != nil {
		return nil, t.loadError(ctx, lctx, pageURL, err)
	}
	v, err := t.evaluate(lctx, expr)
	if err != nil {
		var se *scriptError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("firefox: %s: the page's script failed: %s", pageURL, se.text)
		}
		return nil, t.loadError(ctx, lctx, pageURL, err)
	}
	return []byte(v), nil
}

// scriptError is a script that threw, or returned something else than a
// string, in Session.evaluate.
type scriptError struct{ text string }

func (e *scriptError) Error() string { return "script failed: " + e.text }

// evaluate runs the JavaScript expression expr in the session's tab,
// awaiting it when it is a promise, and returns its value, which must be
// a string (a *scriptError otherwise, or when it threw).
func (t tab) evaluate(ctx context.Context, expr string) (string, error) {
	var r struct {
		Type   string `json:"type"` // "success" or "exception"
		Result struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := t.s.bidi.call(ctx, "script.evaluate", map[string]any{
		"expression": expr, "target": map[string]string{"context": t.id}, "awaitPromise": true,
	}, &r)
	if err != nil {
		return "", err
	}
	if r.Type != "success" || r.Result.Type != "string" {
		return "", &scriptError{strings.TrimSpace(r.Type + " " + r.ExceptionDetails.Text)}
	}
	return r.Result.Value, nil
}
