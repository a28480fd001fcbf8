package sysinfo

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MemAvailable returns the memory available for new work, in bytes:
// /proc/meminfo's MemAvailable (the kernel's estimate of what can be
// allocated without swapping, page cache it can drop included).
func MemAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	return parseMemAvailable(b)
}

func parseMemAvailable(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc/meminfo: unexpected MemAvailable line %q", sc.Text())
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("/proc/meminfo: MemAvailable %q: not a size in kB", f[0])
		}
		return v << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemAvailable line (Linux 3.14 or later has one)")
}
