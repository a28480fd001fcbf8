package browser

import (
	"context"
	"errors"
	"fmt"

	"github.com/chromedp/chromedp"
)

// Bench starts a browser with a fresh profile (as Load does), navigates to
// opts.URL, waits for the load event, evaluates the JavaScript expression
// expr there, awaiting the promise it returns, and closes the browser on
// every path. It returns the string the promise resolved to: quicbench's
// bench page (workload.BenchResultJS) resolves to its result as JSON.
// The navigation and the evaluation together are bounded by opts.Timeout.
// Errors are those of Session.Bench, and of NewSession and Close.
func Bench(ctx context.Context, opts Options, expr string) ([]byte, error) {
	return once(ctx, opts, func(s *Session, url string) ([]byte, error) { return s.Bench(ctx, url, expr) })
}

// Bench navigates the session's tab to pageURL, waits for the load event,
// evaluates expr there (awaiting the promise it returns) and returns the
// string it resolved to. Errors:
//   - *TimeoutError when the navigation and the evaluation together took
//     longer than Options.Timeout (the tab is stopped);
//   - *NavigationError when Chromium failed the navigation itself (with
//     h3, a QUIC connection that could not be made);
//   - an error naming the exception when expr threw or its promise was
//     rejected, or when it did not resolve to a string;
//   - ctx's error when ctx ended first.
//
// Bench does not check protocols: the page's own result carries its
// Resource Timing entries, which the caller checks.
func (s *Session) Bench(ctx context.Context, pageURL, expr string) ([]byte, error) {
	if s.closed.Load() {
		return nil, errors.New("browser: Bench on a closed Session")
	}
	return s.tab().bench(ctx, pageURL, expr)
}

// bench is Session.Bench in tab t.
func (t tab) bench(ctx context.Context, pageURL, expr string) ([]byte, error) {
	if err := checkURL(pageURL, t.opts.Protocol); err != nil {
		return nil, fmt.Errorf("browser: Bench: URL: %w", err)
	}
	lctx, cancel := context.WithTimeout(t.ctx, t.opts.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()

	_, err := chromedp.Run(lctx, chromedp.NavigateResponse(pageURL))
	var out string
	if err == nil {
		out, err = chromedp.Run(lctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
		var ee *chromedp.ExceptionError
		if errors.As(err, &ee) && lctx.Err() == nil {
			return nil, fmt.Errorf("browser: %s: the page's script failed: %w", pageURL, err)
		}
	}
	if err != nil {
		err = t.loadError(ctx, lctx, pageURL, err)
		sctx, scancel := context.WithTimeout(t.ctx, closeGrace)
		_ = chromedp.Do(sctx, chromedp.Stop())
		scancel()
		return nil, err
	}
	return []byte(out), nil
}
