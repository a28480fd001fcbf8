package forward

import (
	"time"

	"github.com/quicbench/quicbench/emu"
)

// The kernel's real-time throttling (kernel.sched_rt_runtime_us: 950 ms
// per second by default) takes the CPU away from SCHED_FIFO threads for the
// rest of each second once they have used their budget: a forwarding
// thread that is busy more than 95% of the time (1 Gbit/s of single 1500-byte
// datagrams keeps it about that busy) is stopped for tens of milliseconds
// every second. While it is stopped, arriving packets wait in the TUN
// device, and the link model, which only learns of a packet when the thread
// reads it, sees its queue run dry and its link fall idle: the delivered rate
// ends 1-3% short. A thread that busy gains nothing from SCHED_FIFO (it is
// hardly ever asleep, so there are few wake-ups to make punctual), so the
// governor moves it to the normal scheduler while it is busy and back once
// it is not. The kernel's throttling stays untouched (it is a host-wide
// setting that quicbench never changes).
const (
	rtWindow      = int64(100 * time.Millisecond) // busy fraction measured over windows this long
	rtShedAbove   = 0.80                          // leave SCHED_FIFO above this busy fraction
	rtResumeBelow = 0.50                          // return to it below this one
)

// rtChange is what the governor asks of the thread.
type rtChange int8

const (
	rtKeep   rtChange = iota // no change
	rtShed                   // move to the normal scheduler
	rtResume                 // move back to SCHED_FIFO
)

// rtGovernor decides, from the thread's CPU time, when a SCHED_FIFO
// forwarding thread leaves and rejoins the real-time class. It never reads a
// clock: the thread passes the times in, so the decisions are tested with
// exact values (rtgov_test.go).
type rtGovernor struct {
	winStart emu.Time // start of the current window
	cpuStart int64    // the thread's CPU time (ns) then
	shed     bool     // the thread has left SCHED_FIFO
}

// start begins the first window at now, with the thread's CPU time cpu.
func (g *rtGovernor) start(now emu.Time, cpu int64) { g.winStart, g.cpuStart = now, cpu }

// due reports whether the current window has ended at now (the caller then
// reads the thread's CPU time and calls step).
func (g *rtGovernor) due(now emu.Time) bool { return int64(now-g.winStart) >= rtWindow }

// step ends the window at now, with the thread's CPU time cpu (ns), and
// returns the change the window's busy fraction calls for.
func (g *rtGovernor) step(now emu.Time, cpu int64) rtChange {
	el := int64(now - g.winStart)
	if el <= 0 {
		return rtKeep
	}
	busy := float64(cpu-g.cpuStart) / float64(el)
	g.winStart, g.cpuStart = now, cpu
	switch {
	case !g.shed && busy > rtShedAbove:
		g.shed = true
		return rtShed
	case g.shed && busy < rtResumeBelow:
		g.shed = false
		return rtResume
	}
	return rtKeep
}
