package plan

import "time"

// TestFairness is the fairness test: the cell's protocol runs one bulk
// download (a TCP flow with the cell's congestion control for h1, h1c, h2
// and tcp; a QUIC flow for h3 and quic) together with its scenario's
// competing flows, all started at the same instant, for duration. The
// sample records every flow's throughput over time, its share of the
// steady part (the last two thirds) and Jain's index of the flows
// (package traffic; docs/metrics.md).
const TestFairness = "fairness"

func init() {
	register(&testDef{seq: 110, name: TestFairness, metric: "jain_index", unit: "index", higher: true, raw: true,
		params: []paramDef{
			{name: "duration", kind: kindDuration, def: "30s", min: 3 * sec, max: 3600 * sec, quickMax: 10 * sec,
				field: func(p *Params) any { return &p.Duration }},
		},
		estimate: func(m *estModel, p Params, _ bool) time.Duration {
			return sum(m.handshake(), p.Duration)
		},
	})
}
