package stats

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// Spread is a distribution of durations by nearest rank: its median, 95th
// percentile and maximum over N values.
type Spread struct {
	P50, P95, Max time.Duration
	N             int
}

// SpreadOf returns the spread of d (the zero Spread when d is empty). It
// does not modify d.
func SpreadOf(d []time.Duration) Spread {
	if len(d) == 0 {
		return Spread{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return Spread{P50: rank(0.5), P95: rank(0.95), Max: s[len(s)-1], N: len(s)}
}

// String renders the spread as "p50 / p95 / max over N samples", each
// rounded to 10 µs.
func (s Spread) String() string {
	if s.N == 0 {
		return "–"
	}
	r := func(d time.Duration) string { return d.Round(10 * time.Microsecond).String() }
	return fmt.Sprintf("%s / %s / %s over %d samples", r(s.P50), r(s.P95), r(s.Max), s.N)
}

// OverheadSample is what the overhead summary needs of one sample: its
// client, its overhead (model.Sample.Overhead), the part of it spent
// draining the link (model.Sample.Drain) and the part the test spent on its
// unmeasured preparation (model.Sample.Prep).
type OverheadSample struct {
	Client                string
	Overhead, Drain, Prep time.Duration
}

// ClientOverhead summarises the per-sample overhead of one client's samples
// (docs/metrics.md, "Per-sample overhead"): Total is everything outside the
// measured part; Drain the wait for the sample's connections to close across
// the link, about one one-way delay of the link; Prep the test's unmeasured
// preparation in the client (warm-up and priming connections; for Chromium
// the browser's start and its priming load); Own the rest (Total minus
// Drain minus Prep per sample): the runner's own work (link reset, control
// round trips, storing) and, for Chromium, the browser's teardown.
type ClientOverhead struct {
	Client                  string
	Total, Drain, Prep, Own Spread
}

// Overheads summarises the overhead of samples per client, the built-in
// client first, then the others in order of first appearance.
func Overheads(samples []OverheadSample) []ClientOverhead {
	type acc struct{ total, drain, prep, own []time.Duration }
	by := map[string]*acc{}
	var order []string
	for _, s := range samples {
		a := by[s.Client]
		if a == nil {
			a = &acc{}
			by[s.Client] = a
			order = append(order, s.Client)
		}
		a.total = append(a.total, s.Overhead)
		a.drain = append(a.drain, s.Drain)
		a.prep = append(a.prep, s.Prep)
		a.own = append(a.own, s.Overhead-s.Drain-s.Prep)
	}
	slices.SortStableFunc(order, func(x, y string) int {
		switch {
		case x == y:
			return 0
		case x == model.ClientBuiltin:
			return -1
		case y == model.ClientBuiltin:
			return 1
		}
		return 0
	})
	out := make([]ClientOverhead, 0, len(order))
	for _, c := range order {
		a := by[c]
		out = append(out, ClientOverhead{Client: c, Total: SpreadOf(a.total), Drain: SpreadOf(a.drain), Prep: SpreadOf(a.prep), Own: SpreadOf(a.own)})
	}
	return out
}

// DatasetOverheads summarises the overhead of every sample of ds per client
// (warm-ups, failed and invalid samples included: each cost its overhead).
func DatasetOverheads(ds *model.Dataset) []ClientOverhead {
	client := make(map[int64]string, len(ds.Cells))
	for _, c := range ds.Cells {
		client[c.ID] = c.Client
	}
	in := make([]OverheadSample, len(ds.Samples))
	for i, s := range ds.Samples {
		in[i] = OverheadSample{Client: client[s.CellID], Overhead: s.Overhead, Drain: s.Drain, Prep: s.Prep}
	}
	return Overheads(in)
}

// OverheadPart is one part of a client's per-sample overhead, for display:
// Label says what it is ("waiting for connections to close across the
// link"...), Of picks its spread from a ClientOverhead.
type OverheadPart struct {
	Label string
	Of    func(ClientOverhead) Spread
}

// Parts lists the parts of o to show under its total, in order: the link
// drain (if recorded), the test's unmeasured preparation (if recorded) and
// the rest, the runner's own work (with, for a browser, the browser's
// teardown). It is empty when neither drain nor preparation was recorded
// (a run of an older quicbench, or samples that had neither), as the rest is
// then the total.
func (o ClientOverhead) Parts() []OverheadPart {
	drain, prep := o.Drain.Max > 0, o.Prep.Max > 0
	return OverheadParts(o.Client, drain, prep)
}

// OverheadParts is ClientOverhead.Parts for a client whose drain and
// preparation were (drain, prep) recorded: what a side-by-side view of two
// runs shows when either run recorded a part.
func OverheadParts(client string, drain, prep bool) []OverheadPart {
	if !drain && !prep {
		return nil
	}
	inBrowser := peers.IsBrowser(client)
	var parts []OverheadPart
	if drain {
		parts = append(parts, OverheadPart{"waiting for connections to close across the link",
			func(o ClientOverhead) Spread { return o.Drain }})
	}
	if prep {
		what := "connecting, priming"
		if st, ok := peers.ClientStack(client); ok {
			switch {
			case st.Client.Kind == peers.KindBrowser && st.Client.Bench:
				what = "browser start; a warm page's priming load or the bench page's load"
			case inBrowser:
				what = "browser start"
			}
		}
		parts = append(parts, OverheadPart{"the test's unmeasured preparation (" + what + ")",
			func(o ClientOverhead) Spread { return o.Prep }})
	}
	own := "the runner's own work"
	if inBrowser {
		own += " and the browser's teardown"
	}
	return append(parts, OverheadPart{own, func(o ClientOverhead) Spread { return o.Own }})
}
