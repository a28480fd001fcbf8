package firefox

import (
	"bytes"
	"os"
	"strconv"
)

// liveInGroup lists the processes of process group pgid that are alive
// (zombies waiting for their reaper do not count).
func liveInGroup(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || f[0][0] == 'Z' || f[0][0] == 'X' {
			continue
		}
		if g, _ := strconv.Atoi(string(f[2])); g == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}
