package netns

import (
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Pinning is where a pinned testbed (Config.Pin) runs its parts: the
// emulator's forwarding threads, and every command started in the server
// and client namespaces (Testbed.Command).
type Pinning struct {
	Emulator, Server, Client []int
}

// PinLayout splits cpus, the CPUs quicbench may use, between the emulator,
// the server and the client: with three or more, one CPU each (the first
// three; the rest stay unused); with two, the server gets one to itself and
// the emulator shares the other with the client (the emulator's threads
// are light and, under SCHED_FIFO, preempt the client when a departure is
// due). With fewer than two there is nothing to separate: an error.
func PinLayout(cpus []int) (Pinning, error) {
	switch {
	case len(cpus) >= 3:
		return Pinning{Emulator: cpus[:1], Server: cpus[1:2], Client: cpus[2:3]}, nil
	case len(cpus) == 2:
		return Pinning{Emulator: cpus[:1], Server: cpus[1:2], Client: cpus[:1]}, nil
	}
	return Pinning{}, fmt.Errorf("pinning needs at least 2 CPUs, this process may use %d", len(cpus))
}

// AllowedCPUs returns the CPUs the calling thread may run on, in order.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// pinCommand makes cmd start under taskset(1) on cpus, so that the
// program and every thread it creates inherit the affinity from its
// first instruction on.
func pinCommand(cmd *exec.Cmd, cpus []int) {
	if cmd.Err != nil || len(cpus) == 0 {
		return
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		cmd.Err = errors.Join(errors.New("a pinned testbed needs taskset (util-linux)"), err)
		return
	}
	cmd.Args = append([]string{"taskset", "-c", cpuList(cpus), cmd.Path}, cmd.Args[1:]...)
	cmd.Path = taskset
}
