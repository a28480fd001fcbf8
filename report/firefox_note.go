package report

import (
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// firefoxH3 reports whether a test has Firefox samples over HTTP/3 from a
// quic-go server (quicbench's own or Caddy), which the report's note on
// Firefox samples qualifies (docs/peers.md, "Firefox").
func firefoxH3(t *stats.TestSet) bool {
	for _, g := range t.Groups {
		if g.Client != model.ClientFirefox {
			continue
		}
		if g.Server != "" && g.Server != model.ServerQuicbench && g.Server != model.ServerCaddy {
			continue
		}
		for _, cs := range g.Cells {
			if cs.Cell.Protocol == model.ProtoH3 {
				return true
			}
		}
	}
	return false
}
