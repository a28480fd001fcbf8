package plan

// TestCPU is the cpu test: a download of size bytes with the CPU time of
// both ends per MB.
const TestCPU = "cpu"

func init() {
	register(&testDef{seq: 100, name: TestCPU, metric: "cpu_s_per_mb", unit: "s/MB",
		params: []paramDef{
			{name: "size", kind: kindSize, def: "100MB", min: 1, max: 100 * gb, quickMax: 10 * mb, field: fieldSize},
		},
		estimate: (*estModel).fetchDown,
	})
}
