package endpoint

import (
	"fmt"
	"syscall"
	"time"
)

// CPUTime is the cumulative CPU time of a process: getrusage(RUSAGE_SELF),
// all threads, user and system. Subtract two readings for an interval.
type CPUTime struct {
	User time.Duration `json:"user_ns"`
	Sys  time.Duration `json:"sys_ns"`
}

// Sub returns c - prev.
func (c CPUTime) Sub(prev CPUTime) CPUTime {
	return CPUTime{User: c.User - prev.User, Sys: c.Sys - prev.Sys}
}

// ProcessCPU reads the CPU time of the calling process.
func ProcessCPU() (CPUTime, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return CPUTime{}, fmt.Errorf("getrusage: %w", err)
	}
	return CPUTime{
		User: time.Duration(ru.Utime.Nano()),
		Sys:  time.Duration(ru.Stime.Nano()),
	}, nil
}
