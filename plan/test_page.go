package plan

import "time"

// TestPage is the page test: a document and its objects, loaded as a
// browser loads a page (plt_ms).
const TestPage = "page"

func init() {
	register(&testDef{seq: 80, name: TestPage, metric: "plt_ms", unit: "ms", browser: true,
		params: []paramDef{
			pObjects,
			{name: "size", kind: kindSize, def: "10KB", min: 1, max: 1 * gb, quickMax: mb, field: fieldSize},
			pConnection,
		},
		estimate: func(m *estModel, p Params, inBrowser bool) time.Duration {
			return m.pageLoad(p.Objects, int64(p.Objects)*p.Size, p.Connection == ConnWarm, inBrowser)
		},
	})
}
