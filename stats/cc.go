package stats

import (
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// Controllers names the congestion controls the cell's connections ran,
// as its valid samples recorded them (TransportStats.CongestionAlgo): the
// server's side, which sends the responses, or the client's when the
// server reported none; e.g. "quic-go NewReno", "kernel Cubic". Several
// are joined with "/"; "" when no sample recorded one.
func (c *CellStats) Controllers() string {
	side := "server"
	if !slices.ContainsFunc(c.Samples, func(s *model.Sample) bool { return hasAlgo(s, "server") }) {
		side = "client"
	}
	var out []string
	for _, s := range c.Samples {
		for _, t := range s.Transport {
			if t.CongestionAlgo == "" || sideName(t.Side) != side {
				continue
			}
			who := "kernel"
			if t.Kind == "quic" {
				if side == "server" {
					who = peers.ServerLabel(c.Cell.ServerImpl(), c.Cell.Protocol)
				} else {
					who = peers.ClientLabel(c.Cell.Client, c.Cell.Protocol)
				}
			}
			l := who + " " + model.CCLabel(t.CongestionAlgo)
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "/")
}

func sideName(s string) string {
	if s == "server" {
		return s
	}
	return "client"
}

func hasAlgo(s *model.Sample, side string) bool {
	return slices.ContainsFunc(s.Transport, func(t model.TransportStats) bool {
		return t.CongestionAlgo != "" && sideName(t.Side) == side
	})
}

// Controllers states which congestion controls the two cells of a
// comparison ran, e.g. "h3: quic-go NewReno; h2: kernel Cubic", so that a
// protocol comparison says when it compares two controllers as well.
func (c *Comparison) Controllers() string {
	a, b := c.A.Controllers(), c.B.Controllers()
	if a == "" && b == "" {
		return ""
	}
	name := func(cs *CellStats, l string) string {
		if l == "" {
			l = "not recorded"
		}
		return cs.Cell.Protocol + ": " + l
	}
	return name(c.A, a) + "; " + name(c.B, b)
}

// MatchedCC reports whether both cells' senders ran the same algorithm
// (Cubic against Cubic, whatever the stacks): false when they differ, or
// when either recorded none.
func (c *Comparison) MatchedCC() bool {
	algos := func(cs *CellStats) []string {
		l := cs.Controllers()
		var out []string
		for _, part := range strings.Split(l, "/") {
			if i := strings.LastIndexByte(part, ' '); i >= 0 {
				out = append(out, part[i+1:])
			}
		}
		return out
	}
	a, b := algos(c.A), algos(c.B)
	return len(a) == 1 && len(b) == 1 && a[0] == b[0]
}
