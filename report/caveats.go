package report

import (
	"slices"

	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/stats"
)

// caveats returns the texts of the clients' caveats (peers.Caveat, from the
// registry) that apply to a test's cells, once each, in the order the
// test's groups come: what the report says under the test's comparisons
// (Firefox's HTTP/3 from quic-go servers, docs/peers.md).
func caveats(t *stats.TestSet) []string {
	var out []string
	for _, g := range t.Groups {
		st, ok := peers.ClientStack(g.Client)
		if !ok || len(st.Client.Caveats) == 0 {
			continue
		}
		for _, cs := range g.Cells {
			for _, cv := range st.Client.Caveats {
				if cv.Applies(cs.Cell.Protocol, g.Server) && !slices.Contains(out, cv.Text) {
					out = append(out, cv.Text)
				}
			}
		}
	}
	return out
}
