package plan

import "time"

// TestStream is the stream test: segments sent at an interval on one
// response, their inter-arrival times.
const TestStream = "stream"

func init() {
	register(&testDef{seq: 70, name: TestStream, metric: "interval_p95_ms", unit: "ms", bench: true,
		params: []paramDef{
			{name: "segments", kind: kindInt, def: "20", min: 2, max: 100000, quickMax: 10, field: func(p *Params) any { return &p.Segments }},
			{name: "interval", kind: kindDuration, def: "50ms", min: 0, max: 60 * sec, quickMax: int64(20 * time.Millisecond), field: func(p *Params) any { return &p.Interval }},
			{name: "size", kind: kindSize, def: "16KB", min: 1, max: 1 * gb, quickMax: mb, field: fieldSize},
		},
		estimate: func(m *estModel, p Params, _ bool) time.Duration {
			paced := mulSat(p.Interval, p.Segments-1)
			bulk := m.transfer(int64(p.Segments)*p.Size, m.down, 1)
			return sum(m.handshake(), m.exchange(), max(paced, bulk))
		},
	})
}
