// Package sysinfo records the machine and software a run is taken on, and
// watches the machine's CPU during a sample so that a saturated machine is
// flagged instead of silently skewing the measurement.
package sysinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
)

// Version is quicbench's version; release builds set it with -ldflags.
var Version = "0.1.0-dev"

// Environment describes this machine and binary. Congestion control and
// sysctls are per testbed and filled in by the caller.
func Environment() model.Environment {
	env := model.Environment{
		Version:   Version,
		GoVersion: runtime.Version(),
		CPUs:      runtime.NumCPU(),
		Kernel:    kernelRelease(),
		CPUModel:  cpuModel(),
	}
	env.Hostname, _ = os.Hostname()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				env.Commit = s.Value
			case "vcs.modified":
				if s.Value == "true" && env.Commit != "" {
					env.Commit += "+dirty"
				}
			}
		}
		for _, d := range bi.Deps {
			if d.Path == "github.com/quic-go/quic-go" {
				env.QuicGoVersion = d.Version
				if d.Replace != nil {
					env.QuicGoVersion = d.Replace.Version
				}
			}
		}
	}
	return env
}

func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// CPUTimes is a snapshot of the machine-wide CPU counters of /proc/stat, in
// clock ticks (USER_HZ, 100 per second on every Linux architecture).
type CPUTimes struct {
	Busy, Total uint64
	// Steal is the time the hypervisor ran something else while a virtual
	// CPU of this machine had work to do (0 on bare metal); it is part of
	// Busy and Total.
	Steal uint64
}

// userHZ is the unit of /proc/stat's counters.
const userHZ = 100

// StealBetween returns the CPU time stolen by the hypervisor between two
// snapshots, summed over the CPUs.
func StealBetween(a, b CPUTimes) time.Duration {
	if b.Steal <= a.Steal {
		return 0
	}
	return time.Duration(b.Steal-a.Steal) * (time.Second / userHZ)
}

// ReadCPUTimes reads the aggregate "cpu" line of /proc/stat.
func ReadCPUTimes() (CPUTimes, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}, err
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (CPUTimes, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return CPUTimes{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var t CPUTimes
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return CPUTimes{}, fmt.Errorf("/proc/stat: field %d: %v", i+1, err)
		}
		// user nice system idle iowait irq softirq steal guest guest_nice;
		// guest times are already included in user and nice.
		if i >= 8 {
			break
		}
		t.Total += v
		if i == 7 {
			t.Steal = v
		}
		if i != 3 && i != 4 { // idle, iowait
			t.Busy += v
		}
	}
	return t, nil
}

// Utilisation is the busy fraction (0..1) of the machine between two
// snapshots; it returns -1 when no time passed.
func Utilisation(a, b CPUTimes) float64 {
	if b.Total <= a.Total {
		return -1
	}
	return float64(b.Busy-a.Busy) / float64(b.Total-a.Total)
}
