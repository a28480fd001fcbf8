package report

import (
	"strconv"

	"github.com/quicbench/quicbench/stats"
)

// implRow is one line of the implementations table: one client and
// server pair measuring a protocol, against the set's reference pair.
type implRow struct {
	Test, Anchor, Config, Proto string
	Stack, Ref                  string // stats.StackName of the row's cell and of the reference
	Med, N, RefMed              string
	Rel, P, Cliff, Verdict      string
	Class                       string
}

// implRows renders the comparisons across implementations
// (stats.Analysis.Implementations): "h3 on quic-go vs h3 on aioquic".
func implRows(an *stats.Analysis) []implRow {
	var out []implRow
	for _, s := range an.Implementations {
		ref := s.Cells[0]
		for _, c := range s.Comparisons {
			a, b := stats.StackName(c.A.Cell), stats.StackName(ref.Cell)
			out = append(out, implRow{
				Test: s.Test, Anchor: anchor("test-", s.Test), Config: s.Label, Proto: s.Protocol,
				Stack: a, Ref: b, Med: num(c.A.Summary.Median), N: strconv.Itoa(c.A.Summary.N),
				RefMed: num(ref.Summary.Median), Rel: pct(c.RelDiff), P: stats.FormatP(c.P),
				Cliff:   cliff(c.Cliff, c.Magnitude),
				Verdict: c.HeadlineAs(a, b),
				Class:   implClass(c),
			})
		}
	}
	return out
}

// implClass colours a verdict across implementations: "a" when the row's
// pair is better, "b" when the reference is.
func implClass(c *stats.Comparison) string {
	switch c.Verdict {
	case stats.ABetter:
		return "a"
	case stats.BBetter:
		return "b"
	case stats.Insufficient:
		return "few"
	case stats.Negligible:
		return "neg"
	}
	return "ns"
}
