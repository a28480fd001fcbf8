// Package competing is the vocabulary of competing traffic: the spec
// grammar of the flows that share the emulated bottleneck with a measured
// one (Parse: bulk TCP with a chosen congestion control, bulk QUIC,
// constant-rate UDP, a seeded on/off web-like source), what a flow's
// receiver counted (FlowResult), and the fairness figures computed from it
// (Jain's index, shares over the steady part, throughput timelines). A
// plan's scenario gives such a spec under competing, and `quicbench
// testbed up --competing` takes one; package traffic runs the flows. It
// needs no testbed, so plans and reports read it without importing one.
// docs/plan-format.md describes the grammar and docs/metrics.md the
// metrics.
package competing

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/model"
)

// Flow kinds.
const (
	// KindTCP is a bulk TCP download: the server side writes as fast as
	// the connection takes, with congestion control CC on its socket.
	KindTCP = "tcp"
	// KindQUIC is a bulk QUIC download: one quic-go stream over its own
	// connection, with the flow-control windows of quicbench's HTTP/3
	// (quic-go's Cubic congestion control, as every QUIC flow here).
	KindQUIC = "quic"
	// KindUDP is constant-rate UDP: 1200-byte datagrams paced at Rate,
	// without congestion control.
	KindUDP = "udp"
	// KindWeb is an on/off web-like source: think times drawn from an
	// exponential distribution of mean Off, each followed by one object
	// fetched over a new TCP connection, its size drawn from a Pareto
	// distribution (shape 1.5) of mean Size, capped at 20 x Size. The
	// draws come from the sample's seed.
	KindWeb = "web"
)

// Defaults of the spec grammar.
const (
	// DefaultWebSize is the mean object size of a web flow.
	DefaultWebSize = 200 * 1000
	// DefaultWebOff is the mean think time of a web flow.
	DefaultWebOff = 500 * time.Millisecond
	// DefaultLead is how long the competing flows run before the
	// measured part of a sample starts, so that they have filled the
	// bottleneck's queue (the bufferbloat question).
	DefaultLead = 2 * time.Second
	// MaxFlows bounds the flows of one spec.
	MaxFlows = 32
)

// Flow is one competing flow (or Count identical ones).
type Flow struct {
	Kind  string
	CC    string        // tcp, web: TCP congestion control ("" = namespace default)
	Count int           // identical flows (>= 1)
	Rate  uint64        // udp: bits per second
	Size  int64         // web: mean object size in bytes
	Off   time.Duration // web: mean think time
}

// Spec is a competing-traffic spec: the flows and how long they run before
// the measured part.
type Spec struct {
	Flows []Flow
	// Lead is how long the flows run before the measured part of a sample
	// (not used by the fairness test, whose flows all start together).
	Lead time.Duration
}

// Count is the number of flows the spec starts.
func (s Spec) Count() int {
	n := 0
	for _, f := range s.Flows {
		n += f.Count
	}
	return n
}

// Parse reads a competing-traffic spec: clauses separated by ";", each a
// flow kind followed by its options, or "lead DURATION":
//
//	tcp [cc NAME] [count N]
//	quic [count N]
//	udp rate RATE [count N]
//	web [size SIZE] [off DURATION] [cc NAME] [count N]
//	lead DURATION
//
// e.g. "tcp cc cubic count 2; udp rate 5mbit". RATE is written as in link
// specs (5mbit, 500kbit), SIZE as in plans (200KB). An empty spec has no
// flows.
func Parse(text string) (Spec, error) {
	s := Spec{Lead: DefaultLead}
	leadSet := false
	for i, clause := range strings.Split(text, ";") {
		w := strings.Fields(clause)
		if len(w) == 0 {
			if strings.TrimSpace(text) == "" {
				continue
			}
			return s, fmt.Errorf("competing clause %d is empty", i+1)
		}
		if w[0] == "lead" {
			if leadSet || len(w) != 2 {
				return s, fmt.Errorf("competing clause %q: lead takes one duration, once", strings.TrimSpace(clause))
			}
			d, err := time.ParseDuration(w[1])
			if err != nil || d < 0 || d > time.Minute {
				return s, fmt.Errorf("competing clause %q: lead must be a duration from 0s to 1m", strings.TrimSpace(clause))
			}
			s.Lead, leadSet = d, true
			continue
		}
		f, err := parseFlow(w)
		if err != nil {
			return s, fmt.Errorf("competing clause %q: %w", strings.TrimSpace(clause), err)
		}
		s.Flows = append(s.Flows, f)
		if s.Count() > MaxFlows {
			return s, fmt.Errorf("competing spec starts more than %d flows", MaxFlows)
		}
	}
	return s, nil
}

func parseFlow(w []string) (Flow, error) {
	f := Flow{Kind: w[0], Count: 1}
	allowed := map[string][]string{
		KindTCP:  {"cc", "count"},
		KindQUIC: {"count"},
		KindUDP:  {"rate", "count"},
		KindWeb:  {"size", "off", "cc", "count"},
	}
	opts, ok := allowed[f.Kind]
	if !ok {
		return f, fmt.Errorf("unknown flow kind %q (kinds: tcp, quic, udp, web; or lead)", f.Kind)
	}
	if f.Kind == KindWeb {
		f.Size, f.Off = DefaultWebSize, DefaultWebOff
	}
	seen := map[string]bool{}
	for i := 1; i < len(w); i += 2 {
		k := w[i]
		if !contains(opts, k) {
			return f, fmt.Errorf("%s flows take %s, not %q", f.Kind, strings.Join(opts, ", "), k)
		}
		if seen[k] {
			return f, fmt.Errorf("%s given twice", k)
		}
		seen[k] = true
		if i+1 >= len(w) {
			return f, fmt.Errorf("%s needs a value", k)
		}
		v := w[i+1]
		switch k {
		case "cc":
			if !ccName(v) {
				return f, fmt.Errorf("cc %q is not a congestion control name", v)
			}
			f.CC = v
		case "count":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxFlows {
				return f, fmt.Errorf("count must be an integer from 1 to %d", MaxFlows)
			}
			f.Count = n
		case "rate":
			l, err := spec.Parse("rate " + v)
			if err != nil || l.RateBps() == 0 {
				return f, fmt.Errorf("rate %q is not a rate such as 5mbit", v)
			}
			f.Rate = l.RateBps()
		case "size":
			n, err := model.ParseSize(v)
			if err != nil || n < 1 || n > 1000*1000*1000 {
				return f, fmt.Errorf("size %q must be a size from 1B to 1GB", v)
			}
			f.Size = n
		case "off":
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Millisecond || d > time.Minute {
				return f, fmt.Errorf("off %q must be a duration from 1ms to 1m", v)
			}
			f.Off = d
		}
	}
	if f.Kind == KindUDP && f.Rate == 0 {
		return f, errors.New("udp flows need a rate (udp rate 5mbit)")
	}
	return f, nil
}

func ccName(s string) bool {
	if s == "" || len(s) > 15 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// String returns the canonical text of the flow: every option that is not
// its default, in a fixed order.
func (f Flow) String() string {
	w := []string{f.Kind}
	if f.Kind == KindUDP {
		w = append(w, "rate", formatRate(f.Rate))
	}
	if f.Kind == KindWeb {
		if f.Size != DefaultWebSize {
			w = append(w, "size", model.FormatSize(f.Size))
		}
		if f.Off != DefaultWebOff {
			w = append(w, "off", f.Off.String())
		}
	}
	if f.CC != "" {
		w = append(w, "cc", f.CC)
	}
	if f.Count > 1 {
		w = append(w, "count", strconv.Itoa(f.Count))
	}
	return strings.Join(w, " ")
}

// Label names the flow in timelines and reports ("tcp cubic", "udp 5mbit").
func (f Flow) Label() string {
	switch f.Kind {
	case KindTCP, KindWeb:
		if f.CC != "" {
			return f.Kind + " " + f.CC
		}
	case KindUDP:
		return "udp " + formatRate(f.Rate)
	}
	return f.Kind
}

// String returns the canonical text of the spec ("" for no flows): Parse
// of it gives the same spec.
func (s Spec) String() string {
	var parts []string
	for _, f := range s.Flows {
		parts = append(parts, f.String())
	}
	if s.Lead != DefaultLead && len(parts) > 0 {
		parts = append(parts, "lead "+s.Lead.String())
	}
	return strings.Join(parts, "; ")
}

func formatRate(bps uint64) string {
	switch {
	case bps%1000000000 == 0:
		return strconv.FormatUint(bps/1000000000, 10) + "gbit"
	case bps%1000000 == 0:
		return strconv.FormatUint(bps/1000000, 10) + "mbit"
	case bps%1000 == 0:
		return strconv.FormatUint(bps/1000, 10) + "kbit"
	}
	return strconv.FormatUint(bps, 10) + "bit"
}
