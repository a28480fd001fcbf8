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
// server reported none; e.g. "quic-go NewReno", "kernel Cubic". Only the
// connections of the cell's protocol count when there are any (an h3
// cell's QUIC connections, not a TCP connection beside them). Several are
// joined with "/"; "" when no sample recorded one.
func (c *CellStats) Controllers() string {
	uses := c.controllers()
	out := make([]string, len(uses))
	for i, u := range uses {
		out[i] = u.who + " " + u.algo
	}
	return strings.Join(out, "/")
}

// ccUse is one congestion control a cell's connections ran: whose (the
// stack's label, or "kernel") and which (model.CCLabel).
type ccUse struct{ who, algo string }

// controllers lists the distinct congestion controls behind Controllers,
// in the order the samples recorded them.
func (c *CellStats) controllers() []ccUse {
	kind := "tcp"
	if model.IsQUIC(c.Cell.Protocol) {
		kind = "quic"
	}
	has := func(side, kind string) bool {
		return slices.ContainsFunc(c.Samples, func(s *model.Sample) bool {
			return slices.ContainsFunc(s.Transport, func(t model.TransportStats) bool {
				return t.CongestionAlgo != "" && sideName(t.Side) == side && (kind == "" || t.Kind == kind)
			})
		})
	}
	// The server's connections of the cell's protocol, else the client's,
	// else whichever side recorded any.
	side, ofKind := "server", true
	switch {
	case has("server", kind):
	case has("client", kind):
		side = "client"
	case has("server", ""):
		ofKind = false
	default:
		side, ofKind = "client", false
	}
	var out []ccUse
	for _, s := range c.Samples {
		for _, t := range s.Transport {
			if t.CongestionAlgo == "" || sideName(t.Side) != side || (ofKind && t.Kind != kind) {
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
			u := ccUse{who, model.CCLabel(t.CongestionAlgo)}
			if !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}

func sideName(s string) string {
	if s == "server" {
		return s
	}
	return "client"
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
// when either recorded none or several.
func (c *Comparison) MatchedCC() bool {
	algos := func(cs *CellStats) []string {
		var out []string
		for _, u := range cs.controllers() {
			if !slices.Contains(out, u.algo) {
				out = append(out, u.algo)
			}
		}
		return out
	}
	a, b := algos(c.A), algos(c.B)
	return len(a) == 1 && len(b) == 1 && a[0] == b[0]
}
