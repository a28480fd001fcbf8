//go:build linux

package offload

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPU returns the CPU time used so far by the calling OS thread.
// Benchmarks report it per op next to wall time because the shared 2-core
// machine this project runs on is often loaded by other work, which inflates
// wall time but not CPU time.
func threadCPU() (time.Duration, bool) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// lockThread pins the benchmark goroutine to its thread so threadCPU
// measures it; the returned function undoes it.
func lockThread() func() {
	runtime.LockOSThread()
	return runtime.UnlockOSThread
}
