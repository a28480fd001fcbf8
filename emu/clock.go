package emu

import (
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// Time is a point in time in nanoseconds on a monotonic clock with an
// arbitrary epoch. Only differences between Times are meaningful, except for
// MonotonicClock, whose Times are CLOCK_MONOTONIC readings.
type Time int64

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns the duration t-u.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Clock tells the time. Pipelines never read a clock themselves: the code
// driving them passes the time in, so tests can use any sequence of times.
type Clock interface {
	Now() Time
}

// nanotime is the runtime's CLOCK_MONOTONIC reading (through the vDSO on
// Linux), the same clock time.Now's monotonic part is built on.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

type monotonicClock struct{}

func (monotonicClock) Now() Time { return Time(nanotime()) }

// MonotonicClock returns the real clock: on Linux its Times are
// clock_gettime(CLOCK_MONOTONIC) readings in nanoseconds, so a Time can be
// handed to clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) or compared with
// kernel timestamps taken on that clock. Reading it costs about 20 ns and
// never allocates.
func MonotonicClock() Clock { return monotonicClock{} }

// ManualClock is a Clock that only moves when told to; the zero value reads
// 0. It is safe for concurrent use. Tests of code that takes a Clock use it
// to drive time explicitly.
type ManualClock struct {
	t atomic.Int64
}

// Now returns the clock's current time.
func (c *ManualClock) Now() Time { return Time(c.t.Load()) }

// Set moves the clock to t (backwards too: a ManualClock checks nothing).
func (c *ManualClock) Set(t Time) { c.t.Store(int64(t)) }

// Advance moves the clock forward by d and returns the new time.
func (c *ManualClock) Advance(d time.Duration) Time { return Time(c.t.Add(int64(d))) }

// Interface guards.
var (
	_ Clock = monotonicClock{}
	_ Clock = (*ManualClock)(nil)
)
