package plan

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// The policies for HAR entries without a body (a plan's missing_bodies).
const (
	MissingRefuse = "refuse" // the plan is refused (default)
	MissingFill   = "fill"   // such entries are served with filler bytes of the recorded size
)

// MissingPolicies are the values of missing_bodies.
var MissingPolicies = []string{MissingRefuse, MissingFill}

// RecordedPages are the built-in recorded pages a site may name.
var RecordedPages = sites.PageNames()

// IsHARSite reports whether a site parameter names a recorded page: a
// built-in one or a HAR file (a path ending in .har).
func IsHARSite(site string) bool {
	return sites.IsPage(site) || isHARPath(site)
}

func isHARPath(v string) bool { return strings.HasSuffix(strings.ToLower(v), ".har") }

// harSummaries caches the summaries of HAR files by path, size and
// modification time: plans are checked and estimated many times.
var harSummaries sync.Map // path -> har.Summary

// HARSummary returns what a recorded page holds: a built-in page's or a
// HAR file's (read once).
func HARSummary(site string) (har.Summary, error) {
	if sites.IsPage(site) {
		return sites.PageSummary(site)
	}
	st, err := os.Stat(site)
	if err != nil {
		return har.Summary{}, err
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", site, st.Size(), st.ModTime().UnixNano())
	if s, ok := harSummaries.Load(key); ok {
		return s.(har.Summary), nil
	}
	h, err := har.ReadFile(site)
	if err != nil {
		return har.Summary{}, err
	}
	s := h.Summarize()
	if s.Served == 0 {
		return s, fmt.Errorf("%s: no entry to replay (%d entries, none an http(s) request with a response)", site, s.Entries)
	}
	if s.PageURL != "" && !strings.HasPrefix(s.PageURL, "https://") {
		return s, fmt.Errorf("%s: the page's document %s is not https: quicbench replays HTTPS pages", site, s.PageURL)
	}
	harSummaries.Store(key, s)
	return s, nil
}

// MissingBodies returns the plan's missing_bodies policy.
func (p *Plan) MissingBodies() string {
	if p.d.missingBodies == "" {
		return MissingRefuse
	}
	return p.d.missingBodies
}

// harCheck checks a HAR site of the plan against the missing-body policy;
// the message is the problem ("" when none) and the note what the plan
// should know.
func harCheck(site string, s har.Summary, policy string) (problem, note string) {
	note = fmt.Sprintf("site %s: %d entries to replay from %d %s (%d skipped), %d bytes", site, s.Served, s.Origins, pluralWord(s.Origins, "origin", "origins"), s.Skipped, s.Bytes)
	if s.Missing == 0 {
		return "", note
	}
	what := fmt.Sprintf("%d %s without a body (%d bytes missing%s)", s.Missing, pluralWord(s.Missing, "entry", "entries"), s.MissingBytes, truncNote(s))
	if policy == MissingFill {
		return "", note + "; " + what + ": filled with bytes of the recorded size (missing_bodies: fill)"
	}
	return what + ": the export left them out (cached) or cut them short; record again with the cache disabled, or set missing_bodies: fill to serve filler bytes of the recorded size", ""
}

func truncNote(s har.Summary) string {
	if s.Truncated == 0 {
		return ""
	}
	return fmt.Sprintf(", %d cut short", s.Truncated)
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// harServerUnsupported says why a server cannot replay a HAR site ("" if
// it can): only quicbench's own server replays.
func harServerUnsupported(site, server string) string {
	if !IsHARSite(site) || server == model.ServerQuicbench {
		return ""
	}
	return fmt.Sprintf("only quicbench's own server replays recorded pages (site %s)", site)
}

// harClientUnsupported says why a client cannot load a HAR site with
// connection conn ("" if it can): the built-in client (cold loads) and the
// registry's browser clients load recorded pages; an audit client's
// browser is its own and would not take the replay's host mapping, and
// the other clients do not load pages.
func harClientUnsupported(site, conn, client string) string {
	if !IsHARSite(site) {
		return ""
	}
	if client == model.ClientBuiltin {
		if conn == ConnWarm {
			return "the built-in client loads recorded pages cold only"
		}
		return ""
	}
	st, ok := peers.ClientStack(client)
	switch {
	case !ok:
		return ""
	case st.Client.Kind == peers.KindAudit:
		return fmt.Sprintf("the %s client does not load recorded pages (its browser would need the replay's host mapping)", client)
	case st.Client.Kind != peers.KindBrowser:
		return fmt.Sprintf("the %s client does not load recorded pages: the built-in client and the browsers do", client)
	}
	return ""
}
