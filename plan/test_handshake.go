package plan

import "time"

// TestHandshake is the handshake test: the set-up of a connection, fresh,
// resumed or with 0-RTT data (its mode parameter).
const TestHandshake = "handshake"

// Handshake modes (the mode parameter of the handshake test).
const (
	ModeFull    = "full"    // a fresh connection, full TLS handshake
	ModeResumed = "resumed" // TLS session resumption from a ticket of a previous connection
	ModeZeroRTT = "0rtt"    // resumption with the request sent as 0-RTT early data
)

func init() {
	register(&testDef{seq: 30, name: TestHandshake, metric: "handshake_ms", unit: "ms",
		params: []paramDef{
			{name: "mode", kind: kindEnum, def: ModeFull, enum: []string{ModeFull, ModeResumed, ModeZeroRTT}, field: func(p *Params) any { return &p.Mode }},
		},
		estimate: func(m *estModel, p Params, _ bool) time.Duration {
			full := m.handshake() + m.exchange()
			switch p.Mode {
			case ModeResumed:
				return full + full // the priming connection, then the resumed one
			case ModeZeroRTT:
				// The request rides in the first flight: one round trip.
				return full + m.rtt + m.lossCost(estQUICInitialPTO)
			}
			return full
		},
	})
}
