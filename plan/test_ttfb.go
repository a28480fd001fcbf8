package plan

// TestTTFB is the ttfb test: time to the first byte of a response on a
// fresh connection.
const TestTTFB = "ttfb"

func init() {
	register(&testDef{seq: 20, name: TestTTFB, metric: "ttfb_ms", unit: "ms", bench: true, raw: true,
		params: []paramDef{
			{name: "size", kind: kindSize, def: "1KB", min: 1, max: 100 * gb, quickMax: mb, field: fieldSize},
		},
		estimate: (*estModel).fetchDown,
	})
}
