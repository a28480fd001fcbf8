package plan

import "time"

// TestSite is the site test: the load of a generated site or of a
// directory's site (its site parameter).
const TestSite = "site"

func init() {
	register(&testDef{seq: 90, name: TestSite, metric: "plt_ms", unit: "ms", browser: true,
		params: []paramDef{
			{name: "site", kind: kindSite, field: func(p *Params) any { return &p.Site }},
			pConnection,
		},
		estimate: func(m *estModel, p Params, inBrowser bool) time.Duration {
			reqs, total := siteShape(p.Site)
			return m.pageLoad(reqs-1, total, p.Connection == ConnWarm, inBrowser)
		},
	})
}
