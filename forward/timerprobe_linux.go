package forward

import (
	"fmt"
	"sync"
	"time"

	"github.com/quicbench/quicbench/emu"
	"golang.org/x/sys/unix"
)

// TimerProbe measures the machine's own timer precision: a thread set up
// exactly like a forwarding thread (locked, 1 ns timer slack, SCHED_FIFO
// when allowed, sleeping in a raw ppoll that keeps its P) sleeps a fixed
// period again and again and records how late each wake-up comes. Run next
// to a forwarder, it is the baseline that tells the emulator's timing error
// apart from the machine's: a virtual machine whose virtual CPU is
// descheduled by its host wakes every thread late, the probe included, and
// no user-space emulator can be more precise than that.
//
// The probe costs one short wake-up per period (about 1% of a core at the
// 1 ms period calibrate uses).
type TimerProbe struct {
	period int64
	clock  emu.Clock
	wake   int // eventfd that ends the sleep when the probe stops

	mu    sync.Mutex
	cur   TimerStats
	stop  bool
	done  chan struct{}
	setup error
}

// TimerStats is what a TimerProbe measured since it started or since the
// previous Take.
type TimerStats struct {
	Realtime  bool   // the probe thread ran under SCHED_FIFO
	Wakeups   uint64 // timed wake-ups
	LateSumNs uint64 // sum of their lateness
	LateMaxNs uint64 // the latest one
	// Wake-ups later than 50 µs, 150 µs (the delay p99 tolerance of
	// calibrate) and 500 µs.
	Over50us, Over150us, Over500us uint64
	// LateOver150SumNs sums the lateness of the wake-ups later than 150 µs:
	// roughly how long, in all, the machine held threads back that much.
	LateOver150SumNs uint64
}

// LateMean returns the mean lateness of the wake-ups (0 without any).
func (s TimerStats) LateMean() time.Duration {
	if s.Wakeups == 0 {
		return 0
	}
	return time.Duration(s.LateSumNs / s.Wakeups)
}

// String summarises the stats for a log line.
func (s TimerStats) String() string {
	return fmt.Sprintf("%d wake-ups, lateness mean %v max %v, %d over 150µs, %d over 500µs",
		s.Wakeups, s.LateMean(), time.Duration(s.LateMaxNs), s.Over150us, s.Over500us)
}

// add records one wake-up late by late ns.
func (s *TimerStats) add(late uint64) {
	s.Wakeups++
	s.LateSumNs += late
	s.LateMaxNs = max(s.LateMaxNs, late)
	if late > 50_000 {
		s.Over50us++
	}
	if late > 150_000 {
		s.Over150us++
		s.LateOver150SumNs += late
	}
	if late > 500_000 {
		s.Over500us++
	}
}

// StartTimerProbe starts a probe thread that sleeps period (at least 10 µs,
// at most maxSleep) between wake-ups, timed with clock. With realtime it
// asks for SCHED_FIFO at RealtimePriority, like Options.Realtime; without
// the privilege it stays on the normal scheduler (TimerStats.Realtime).
func StartTimerProbe(clock emu.Clock, period time.Duration, realtime bool) (*TimerProbe, error) {
	if period < 10*time.Microsecond || int64(period) > maxSleep {
		return nil, fmt.Errorf("timer probe: period %v outside [10µs, %v]", period, time.Duration(maxSleep))
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("timer probe: eventfd: %w", err)
	}
	t := &TimerProbe{period: int64(period), clock: clock, wake: wake, done: make(chan struct{})}
	reserveProcs(1)
	started := make(chan struct{})
	go func() {
		defer close(t.done)
		defer releaseProcs(1)
		t.run(realtime, started)
	}()
	<-started
	if t.setup != nil {
		<-t.done
		unix.Close(wake)
		return nil, t.setup
	}
	return t, nil
}

func (t *TimerProbe) run(realtime bool, started chan<- struct{}) {
	rt, release, slackErr := preciseThread(realtime, nil)
	defer release()
	if slackErr != nil {
		t.setup = fmt.Errorf("timer probe: set timer slack: %w", slackErr)
		close(started)
		return
	}
	t.cur.Realtime = rt
	close(started)
	fds := []unix.PollFd{{Fd: int32(t.wake), Events: unix.POLLIN}}
	var ts unix.Timespec
	due := t.clock.Now() + emu.Time(t.period)
	for {
		ts = unix.NsecToTimespec(int64(due - t.clock.Now()))
		if ts.Sec < 0 || (ts.Sec == 0 && ts.Nsec <= 0) {
			ts = unix.Timespec{}
		}
		ready, err := ppoll(fds, &ts)
		now := t.clock.Now()
		t.mu.Lock()
		if t.stop {
			t.mu.Unlock()
			return
		}
		if ready == 0 && err == nil {
			t.cur.add(lateness(due, now))
			// The next sleep is a full period from now, so that one late
			// wake-up is counted once, not again for every period it
			// overran.
			due = now + emu.Time(t.period)
		}
		t.mu.Unlock()
	}
}

// Take returns what the probe measured since it started or since the
// previous Take, and starts a new count.
func (t *TimerProbe) Take() TimerStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.cur
	t.cur = TimerStats{Realtime: s.Realtime}
	return s
}

// Stop ends the probe thread and returns what it measured since the
// previous Take. It is safe to call more than once.
func (t *TimerProbe) Stop() TimerStats {
	t.mu.Lock()
	already := t.stop
	t.stop = true
	t.mu.Unlock()
	if !already {
		var one = [8]byte{1}
		unix.Write(t.wake, one[:])
		<-t.done
		unix.Close(t.wake)
	}
	return t.Take()
}
