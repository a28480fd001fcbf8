package emu

import (
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// clockGettimeMonotonic reads CLOCK_MONOTONIC through the raw system call.
func clockGettimeMonotonic(t *testing.T) int64 {
	var ts syscall.Timespec
	const clockMonotonic = 1
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		t.Fatalf("clock_gettime: %v", errno)
	}
	return ts.Nano()
}

func TestMonotonicClockIsClockMonotonic(t *testing.T) {
	c := MonotonicClock()
	for i := 0; i < 100; i++ {
		before := c.Now()
		kernel := clockGettimeMonotonic(t)
		after := c.Now()
		if !(int64(before) <= kernel && kernel <= int64(after)) {
			t.Fatalf("CLOCK_MONOTONIC %d not between two MonotonicClock readings %d and %d", kernel, before, after)
		}
	}
}

func TestMonotonicClockNeverGoesBack(t *testing.T) {
	c := MonotonicClock()
	prev := c.Now()
	for i := 0; i < 10000; i++ {
		now := c.Now()
		if now < prev {
			t.Fatalf("clock went back from %d to %d", prev, now)
		}
		prev = now
	}
}

func TestManualClock(t *testing.T) {
	var c ManualClock
	if c.Now() != 0 {
		t.Fatalf("zero ManualClock reads %d", c.Now())
	}
	if got := c.Advance(25 * time.Millisecond); got != 25_000_000 {
		t.Fatalf("Advance returned %d", got)
	}
	c.Set(7)
	if c.Now() != 7 {
		t.Fatalf("after Set(7): %d", c.Now())
	}
}

func TestTimeArithmetic(t *testing.T) {
	var a Time = 1000
	if b := a.Add(time.Microsecond); b != 2000 || b.Sub(a) != time.Microsecond {
		t.Fatalf("Add/Sub: %d %v", b, b.Sub(a))
	}
}

func BenchmarkMonotonicClock(b *testing.B) {
	c := MonotonicClock()
	b.ReportAllocs()
	var sink Time
	for b.Loop() {
		sink += c.Now()
	}
	_ = sink
}
