package plan

import "time"

// TestUpload is the upload test: the goodput of one request body of size
// bytes.
const TestUpload = "upload"

func init() {
	register(&testDef{seq: 50, name: TestUpload, metric: "goodput_mbps", unit: "Mbit/s", bench: true, higher: true, raw: true,
		params: []paramDef{withDefault(pSize100GB, "1MB")},
		estimate: func(m *estModel, p Params, _ bool) time.Duration {
			return sum(m.handshake(), m.exchange(), m.transfer(p.Size, m.up, 1))
		},
	})
}
