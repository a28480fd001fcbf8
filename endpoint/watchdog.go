package endpoint

import (
	"context"
	"sync"
	"time"
)

// Request stages, in order: a watchdog only moves forward, so that a late
// report of an earlier event (net/http can report "request written" after
// the response's first byte) never re-arms an earlier phase's limit.
const (
	stageSending   = iota // writing the request (and its body)
	stageWaiting          // request sent, waiting for the first response byte
	stageReceiving        // reading the response body
)

// watchdog cancels a request's context with a *TimeoutError when the
// current phase makes no progress within its limit. Progress (a chunk read
// or written) re-arms it; advance moves to a later stage.
type watchdog struct {
	mu     sync.Mutex
	timer  *time.Timer
	stage  int
	phase  string
	limit  time.Duration
	cancel context.CancelCauseFunc
	done   bool
}

// newWatchdog returns a context that is cancelled when the watchdog fires,
// armed for phase with limit.
func newWatchdog(parent context.Context, phase string, limit time.Duration) (context.Context, *watchdog) {
	ctx, cancel := context.WithCancelCause(parent)
	w := &watchdog{cancel: cancel, phase: phase, limit: limit}
	w.timer = time.AfterFunc(limit, w.fire)
	return ctx, w
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	w.cancel(&TimeoutError{Phase: w.phase, Limit: w.limit})
}

// advance moves to a later stage with phase and limit and re-arms the
// timer; it does nothing for a stage not later than the current one.
func (w *watchdog) advance(stage int, phase string, limit time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done || stage <= w.stage {
		return
	}
	w.stage, w.phase, w.limit = stage, phase, limit
	w.timer.Reset(limit)
}

// progress re-arms the timer for the current phase.
func (w *watchdog) progress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.timer.Reset(w.limit)
}

// stop disarms the watchdog and releases its context.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.done = true
	w.timer.Stop()
	w.mu.Unlock()
	w.cancel(context.Canceled)
}
