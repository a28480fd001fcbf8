package firefox

import (
	"context"
	"fmt"
	"time"
)

// Quit asks Firefox to shut down in order (WebDriver BiDi's
// browser.close) and waits, at most until ctx ends, for its main process
// to exit; Close must still be called (it kills whatever is left and
// removes the profile). An orderly shutdown closes the browser's
// connections (a QUIC CONNECTION_CLOSE instead of an idle timeout at the
// server) and flushes what Firefox writes as it goes, such as the qlog
// files of network.http.http3.enable_qlog, which a killed browser leaves
// cut short. Close alone kills the browser, which is quicker and what a
// measured sample does; Quit is for investigations that need the logs.
func (s *Session) Quit(ctx context.Context) error {
	if s.closed.Load() {
		return errClosed
	}
	// Firefox may close the WebSocket before it answers: the exit, not the
	// answer, is what counts.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	callErr := s.bidi.call(cctx, "browser.close", nil, nil)
	cancel()
	select {
	case <-s.exited:
		return nil
	case <-ctx.Done():
		if callErr != nil {
			return fmt.Errorf("firefox: quit: %w (browser.close: %v)", ctx.Err(), callErr)
		}
		return fmt.Errorf("firefox: quit: %w", ctx.Err())
	}
}
