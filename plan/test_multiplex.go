package plan

import "time"

// TestMultiplex is the multiplex test: objects requested in parallel, the
// span until the last completes.
const TestMultiplex = "multiplex"

func init() {
	register(&testDef{seq: 60, name: TestMultiplex, metric: "span_ms", unit: "ms", bench: true,
		params: []paramDef{
			pObjects,
			{name: "size", kind: kindSize, def: "100KB", min: 1, max: 10 * gb, quickMax: mb, field: fieldSize},
		},
		estimate: func(m *estModel, p Params, _ bool) time.Duration {
			conns, rounds := m.parallel(p.Objects)
			return sum(m.handshake(), mulSat(m.exchange(), rounds),
				m.transfer(int64(p.Objects)*p.Size, m.down, conns))
		},
	})
}
