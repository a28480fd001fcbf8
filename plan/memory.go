package plan

import (
	"math"

	"github.com/quicbench/quicbench/model"
)

// Memory bounds of parallel runs. Testbeds that wait on slow links cost
// little CPU, so the admission rule's CPU budget may admit many of them;
// what else each one holds is memory (measured on the reference machine:
// docs/performance.md, "Parallel testbeds: memory, files and threads").
const (
	// MemPerTestbed is what one testbed of a run holds: its two
	// namespaces and TUN devices in the kernel, its forwarder's pipelines
	// and buffers in the runner, and its server and client agent
	// processes (proportional set sizes).
	MemPerTestbed = 64 << 20
	// MemShare is the share of the memory available when a run starts
	// (MemAvailable) that its testbeds and browsers may take; the rest is
	// for the machine's other work and for what a sample allocates
	// (buffers of a fast transfer, a browser's growth).
	MemShare = 0.75
	// RefMemAvailable is the memory available on the reference machine
	// (24 GB, 22 of it available), for the estimate.
	RefMemAvailable = 22 << 30

	// FilesPerTestbed is the file descriptors the runner process holds per
	// testbed (measured: 16; namespaces, TUN devices, the pipes to its
	// server and agent, sockets), with room to spare; FilesReserve is what
	// the process keeps for everything else (the database, its own
	// files). A run's testbeds fit its RLIMIT_NOFILE (FileLimit).
	FilesPerTestbed = 32
	FilesReserve    = 128
)

// FileLimit returns the most testbeds whose file descriptors fit a limit
// of nofile open files (RLIMIT_NOFILE), at least 1.
func FileLimit(nofile uint64) int {
	if nofile <= FilesReserve {
		return 1
	}
	return int(max(1, min((nofile-FilesReserve)/FilesPerTestbed, math.MaxInt32)))
}

// MemoryLimits returns how many testbeds, and how many blocks in a browser
// at once, fit in MemShare of avail bytes of available memory for a run of
// cells that asks for up to slots testbeds: testbeds is min(slots, the
// testbeds MemPerTestbed allows), at least 1; browsers is what the memory
// left beside those testbeds allows a testbed to hold one browser of each
// browser the cells use (its stack's client.cost.memory_mb; an audit
// client's is the browser it uses), at least 1, or 0 (no limit) when no
// cell runs in a browser.
func MemoryLimits(avail int64, slots int, cells []model.Cell) (testbeds, browsers int) {
	budget := MemShare * float64(max(avail, 0))
	testbeds = max(1, min(slots, int(budget/MemPerTestbed)))
	var perTestbed int64
	seen := map[string]bool{}
	for i := range cells {
		if bc, ok := browserCostOf(cells[i].Client); ok && !seen[bc.stack] {
			seen[bc.stack] = true
			perTestbed += bc.memory
		}
	}
	if perTestbed == 0 {
		return testbeds, 0
	}
	left := budget - float64(testbeds)*MemPerTestbed
	browsers = int(math.Max(1, math.Floor(left/float64(perTestbed))))
	return testbeds, browsers
}
