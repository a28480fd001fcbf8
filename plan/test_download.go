package plan

// TestDownload is the download test: the goodput of one response of size
// bytes.
const TestDownload = "download"

func init() {
	register(&testDef{seq: 40, name: TestDownload, metric: "goodput_mbps", unit: "Mbit/s", bench: true, higher: true, raw: true,
		params:   []paramDef{withDefault(pSize100GB, "1MB")},
		estimate: (*estModel).fetchDown,
	})
}
