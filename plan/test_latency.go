package plan

import "time"

// TestLatency is the latency test: request-response round trips over one
// established connection.
const TestLatency = "latency"

func init() {
	register(&testDef{seq: 10, name: TestLatency, metric: "latency_ms", unit: "ms", bench: true, raw: true,
		params: []paramDef{
			{name: "requests", kind: kindInt, def: "20", min: 1, max: 100000, quickMax: 10, field: func(p *Params) any { return &p.Requests }},
			{name: "size", kind: kindSize, def: "0B", min: 0, max: 100 * mb, quickMax: mb, field: fieldSize},
		},
		estimate: func(m *estModel, p Params, _ bool) time.Duration {
			per := m.exchange()
			if p.Size > 0 {
				per = addSat(per, m.transfer(p.Size, m.down, 1))
			}
			return sum(m.handshake(), m.exchange(), mulSat(per, p.Requests))
		},
	})
}
