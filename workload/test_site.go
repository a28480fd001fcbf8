package workload

import (
	"net/url"

	"github.com/quicbench/quicbench/plan"
)

// The site test loads a site's start page as the page test loads its page
// (the runner serves the site under the name it hands as p.Site).
func init() { define(plan.TestSite, run{path: sitePath, builtin: page}) }

// sitePath is the URL of a site's start page: its directory (the file
// server redirects .../index.html to it, which would cost a round trip).
func sitePath(p plan.Params) string {
	return "/site/" + url.PathEscape(p.Site) + "/"
}
