package forward

import "github.com/quicbench/quicbench/emu"

// wakeAction is what a forwarding thread does once its input is drained.
type wakeAction uint8

const (
	wakeServe wakeAction = iota // a departure is due: deliver at once
	wakeSpin                    // a departure is closer than the early wake-up: busy-wait until it
	wakeSleep                   // sleep in ppoll (input, a signal or the timeout ends it)
)

// wakePlan is a forwarding thread's decision when nothing waits on its
// input.
type wakePlan struct {
	action  wakeAction
	timeout int64    // wakeSleep: ns to sleep, at most maxSleep
	timed   bool     // wakeSleep: the timeout is set by a departure, not by maxSleep
	wakeAt  emu.Time // timed: when the thread asked to wake (the departure minus the advance)
	due     emu.Time // wakeSpin, timed: the departure
}

// waker decides when a forwarding thread wakes up. It never reads a clock:
// the thread passes the time in, so the decisions are tested with exact
// times (wake_test.go).
type waker struct {
	adaptive bool  // Options.TimerAdvance: learn the kernel's wake-up latency
	advance  int64 // ns to wake before a departure; stays 0 unless adaptive
}

// plan decides, at now, what to do given the pipeline's next departure d
// (ok false: the pipeline holds nothing). A departure further than maxSleep
// (plus the largest advance) is not waited for: the thread sleeps maxSleep
// and asks again. Otherwise it asks to wake advance ns early, by the
// kernel's usual wake-up latency, and spins the rest (path.spinUntil).
func (w *waker) plan(now, d emu.Time, ok bool) wakePlan {
	if !ok || int64(d-now) >= maxSleep+maxAdvance {
		return wakePlan{action: wakeSleep, timeout: maxSleep}
	}
	if d <= now {
		return wakePlan{action: wakeServe}
	}
	wakeAt := max(d-emu.Time(w.advance), now)
	if wakeAt == now {
		return wakePlan{action: wakeSpin, due: d}
	}
	return wakePlan{action: wakeSleep, timeout: int64(wakeAt - now), timed: true, wakeAt: wakeAt, due: d}
}

// timedOut records that the timed sleep of pl ended by its timeout at now:
// with adaptive advance, the advance follows the mean wake-up latency (an
// exponential average with weight 1/16, each sample within [0,
// maxAdvance]).
func (w *waker) timedOut(pl wakePlan, now emu.Time) {
	if w.adaptive {
		wl := min(max(int64(now-pl.wakeAt), 0), maxAdvance)
		w.advance += (wl - w.advance) / 16
	}
}

// lateness is how late a departure due at due was served at now.
func lateness(due, now emu.Time) uint64 { return uint64(max(int64(now-due), 0)) }

// dueBy reports whether the pipeline's next departure (d, ok) is due at
// now, which interrupts a read batch.
func dueBy(now, d emu.Time, ok bool) bool { return ok && d <= now }

// readState spares a forwarding thread the reads that would only find its
// input empty: after a read batch that ended on an empty input, and after
// a ppoll that returned with the input not readable, the thread serves its
// departures and goes to sleep without reading first. ppoll is level
// triggered, so a packet that arrives meanwhile ends that sleep at once:
// nothing waits longer, and an idle input costs no read system call.
type readState struct {
	skip bool // the input was just seen empty
}

// shouldRead reports whether the thread reads its input now. A skip holds
// for one pass of the loop only.
func (r *readState) shouldRead() bool {
	if r.skip {
		r.skip = false
		return false
	}
	return true
}

// read records a read batch that took n packets and ended on an empty
// input (empty) or not (batch limit, departure due). It returns whether
// the thread serves its departures and comes back (n > 0) rather than
// plan its sleep.
func (r *readState) read(n int, empty bool) bool {
	if n == 0 {
		return false
	}
	r.skip = empty
	return true
}

// woke records a return from ppoll: inputReady when the input device had
// events (or ppoll failed, so that nothing is assumed).
func (r *readState) woke(inputReady bool) { r.skip = !inputReady }
