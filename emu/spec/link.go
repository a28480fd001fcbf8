// Package spec parses and prints quicbench link specifications: one
// direction's impairments in tc-netem's grammar ("delay 25ms 5ms loss 1%
// rate 10mbit"), plus quicbench's extensions (trace, queue, onoff).
//
// The grammar, every keyword, its units and defaults, and each difference
// from netem are documented in docs/link-spec.md. Parse and String round-trip:
// Parse(l.String()) returns l for every Link that Parse returned.
package spec

import (
	"strconv"
	"strings"
	"time"
)

// Distribution is the shape of the delay jitter.
type Distribution uint8

// Jitter distributions, as netem's tables. The zero value, uniform, is what
// netem does when no distribution is given.
const (
	DistUniform      Distribution = iota // uniform in [delay-jitter, delay+jitter)
	DistNormal                           // normal, standard deviation jitter, cut at ±4 jitter
	DistPareto                           // Pareto (alpha 3), mean delay, heavy right tail, cut at +4 jitter
	DistParetoNormal                     // 1/4 normal + 3/4 Pareto (NIST Net's mix), cut at ±4 jitter
)

var distNames = [...]string{"uniform", "normal", "pareto", "paretonormal"}

// String returns the distribution's keyword.
func (d Distribution) String() string {
	if int(d) < len(distNames) {
		return distNames[d]
	}
	return "Distribution(" + strconv.Itoa(int(d)) + ")"
}

// LossModel selects how packets are lost.
type LossModel uint8

// Loss models. The zero value is no loss.
const (
	LossNone    LossModel = iota
	LossRandom            // independent (or correlated) Bernoulli loss: loss [random] P [CORR]
	LossGemodel           // Gilbert-Elliott: loss gemodel P [R [1-H [1-K]]]
	LossState             // 4-state Markov (GI model): loss state P13 [P31 [P32 [P23 [P14]]]]
)

// Loss is a loss model and its parameters, all in percent (0..100).
type Loss struct {
	Model LossModel

	// LossRandom: loss probability and correlation with the previous
	// packet's fate.
	Percent     float64
	Correlation float64

	// LossGemodel: P is the good->bad transition probability, R bad->good,
	// BadLoss (netem's 1-H) the loss probability in the bad state, GoodLoss
	// (netem's 1-K) in the good state.
	P, R, BadLoss, GoodLoss float64

	// LossState: transition probabilities of netem's 4-state model
	// (1 = good, 2 = good within a burst, 3 = burst loss, 4 = isolated loss).
	P13, P31, P32, P23, P14 float64
}

// QueueKind is the discipline of the bottleneck queue (in front of rate or
// trace).
type QueueKind uint8

// Queue disciplines. The zero value is drop-tail.
const (
	QueueDropTail QueueKind = iota // drop arrivals when the queue is full
	QueueCoDel                     // CoDel (RFC 8289), with drop-tail at the limits
)

// Defaults of netem and CoDel.
const (
	DefaultLimit         = 1000                   // packets, netem's and Linux codel's default limit
	DefaultCoDelTarget   = 5 * time.Millisecond   // RFC 8289
	DefaultCoDelInterval = 100 * time.Millisecond // RFC 8289
)

// Link is one direction's impairments. The zero Link is a perfect link (no
// impairment). Percentages are in percent (0..100); times are exact
// nanosecond Durations. Fields are exported for reading; build Links with
// Parse so they are validated and normalized (a Link built by hand may hold
// combinations Parse rejects).
type Link struct {
	// delay TIME [JITTER [CORRELATION]] [distribution D]
	Delay        time.Duration
	Jitter       time.Duration
	DelayCorr    float64 // percent; correlation of successive jitter draws
	Distribution Distribution

	Loss Loss

	// duplicate P [CORR], corrupt P [CORR]
	Duplicate, DuplicateCorr float64
	Corrupt, CorruptCorr     float64

	// reorder P [CORR] [gap N]; Gap is 1 whenever Reorder is set and no gap
	// was given (every packet may be sent early), as tc does.
	Reorder, ReorderCorr float64
	Gap                  uint32

	// rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]
	Rate           uint64 // bits per second; 0 = unlimited
	PacketOverhead int32  // bytes added to (or, negative, removed from) each packet's size
	CellSize       uint32 // bytes; sizes are rounded up to whole cells
	CellOverhead   int32  // bytes added per cell

	// limit PACKETS: the bottleneck queue's packet limit; 0 means the default
	// (DefaultLimit, or none when QueueBytes is set).
	Limit uint32

	// queue droptail|codel [bytes SIZE] [target TIME] [interval TIME]
	Queue      QueueKind
	QueueBytes uint64        // byte limit of the bottleneck queue; 0 = none
	Target     time.Duration // CoDel target; 0 = DefaultCoDelTarget
	Interval   time.Duration // CoDel interval; 0 = DefaultCoDelInterval

	// trace FILE: mahimahi delivery-opportunity trace (the link's capacity).
	Trace string

	// onoff ON OFF: periodic blackout, ON first, from the first packet.
	On, Off time.Duration

	// mtu BYTES [icmp|blackhole]: the largest IP packet the link carries
	// (0 = no limit below the devices' own MTU); a larger one is dropped,
	// and with MTUMode MTUICMP its sender is told (ICMP "fragmentation
	// needed") when it set Don't Fragment.
	MTU     uint32
	MTUMode MTUMode
}

// MTUMode says what happens to a packet above the link's MTU.
type MTUMode uint8

// MTU modes. The zero value, icmp, is what a router does (RFC 1191).
const (
	MTUICMP      MTUMode = iota // drop it, answer ICMP fragmentation needed to a sender that set DF
	MTUBlackhole                // drop it silently (an ICMP black hole, RFC 2923)
)

var mtuModeNames = [...]string{"icmp", "blackhole"}

// String returns the mode's keyword.
func (m MTUMode) String() string {
	if int(m) < len(mtuModeNames) {
		return mtuModeNames[m]
	}
	return "MTUMode(" + strconv.Itoa(int(m)) + ")"
}

// MTU bounds: 68 is the smallest MTU IPv4 allows (RFC 791); MaxMTU is the
// MTU of the testbed's TUN devices (netns.MTU), above which no wire packet
// reaches the link.
const (
	MinMTU = 68
	MaxMTU = 1500
)

// IsZero reports whether l impairs nothing: no delay, jitter, loss,
// duplication, corruption, reordering, rate, trace, blackout or MTU. (A limit or
// queue setting alone impairs nothing: queues only form behind a rate or
// trace, and Parse rejects queue without one.)
func (l Link) IsZero() bool {
	return l.Delay == 0 && l.Jitter == 0 && l.Loss.Model == LossNone &&
		l.Duplicate == 0 && l.Corrupt == 0 && l.Reorder == 0 &&
		l.Rate == 0 && l.Trace == "" && l.On == 0 && l.Off == 0 && l.MTU == 0
}

// RateBps returns the link's rate in BITS per second, 0 for unlimited (and
// for a trace link, whose capacity varies: see emu/trace for its mean and
// peak).
func (l Link) RateBps() uint64 { return l.Rate }

// BaseDelay returns the configured one-way delay, without jitter.
func (l Link) BaseDelay() time.Duration { return l.Delay }

// MaxDelay returns the largest one-way propagation delay a packet can draw:
// the base delay plus the jitter distribution's bound (1x jitter for
// uniform, 4x for the others, which are cut there). Queueing behind a rate,
// trace or blackout comes on top.
func (l Link) MaxDelay() time.Duration {
	if l.Distribution == DistUniform {
		return l.Delay + l.Jitter
	}
	return l.Delay + 4*l.Jitter
}

// MaxWait returns the longest a delivered packet can take across the
// link: MaxDelay, plus the time a full bottleneck queue takes to drain at
// the link's rate (its packet limit of full-size packets or its byte
// limit, whichever holds less), plus a blackout's off period. A trace
// link's queue is not counted (its capacity varies; emu/trace has its
// mean rate). A queue of netem's default 1000 packets drains in 12 s at
// 1 Mbit/s: a TCP connection that filled it waits that long for a lost
// segment's retransmission.
func (l Link) MaxWait() time.Duration {
	w := l.MaxDelay() + l.Off
	if l.Rate == 0 {
		return w
	}
	packets, bytes := l.QueueLimit()
	held := bytes
	if packets > 0 && (held == 0 || uint64(packets)*MaxMTU < held) {
		held = uint64(packets) * MaxMTU
	}
	return w + time.Duration(float64(held*8)/float64(l.Rate)*float64(time.Second))
}

// HasBottleneck reports whether the link has a capacity limit (rate or
// trace), the only place a queue can build.
func (l Link) HasBottleneck() bool { return l.Rate > 0 || l.Trace != "" }

// QueueLimit returns the bottleneck queue's effective limits: packets (0 =
// none) and bytes (0 = none). The packet limit is Limit if set, else
// DefaultLimit unless a byte limit was given.
func (l Link) QueueLimit() (packets int, bytes uint64) {
	switch {
	case l.Limit > 0:
		packets = int(l.Limit)
	case l.QueueBytes == 0:
		packets = DefaultLimit
	}
	return packets, l.QueueBytes
}

// CoDelParams returns CoDel's target and interval with defaults applied.
func (l Link) CoDelParams() (target, interval time.Duration) {
	target, interval = l.Target, l.Interval
	if target == 0 {
		target = DefaultCoDelTarget
	}
	if interval == 0 {
		interval = DefaultCoDelInterval
	}
	return target, interval
}

// String returns the canonical text of l: keywords in a fixed order, times
// and rates in exact units, defaults left out; "none" for the zero Link.
func (l Link) String() string {
	var b []string
	add := func(s ...string) { b = append(b, s...) }
	if l.Limit != 0 {
		add("limit", strconv.FormatUint(uint64(l.Limit), 10))
	}
	if l.Delay != 0 || l.Jitter != 0 {
		add("delay", formatDuration(l.Delay))
		if l.Jitter != 0 {
			add(formatDuration(l.Jitter))
			if l.DelayCorr != 0 {
				add(formatPercent(l.DelayCorr))
			}
			if l.Distribution != DistUniform {
				add("distribution", l.Distribution.String())
			}
		}
	}
	switch l.Loss.Model {
	case LossRandom:
		add("loss", formatPercent(l.Loss.Percent))
		if l.Loss.Correlation != 0 {
			add(formatPercent(l.Loss.Correlation))
		}
	case LossGemodel:
		add("loss", "gemodel", formatPercent(l.Loss.P), formatPercent(l.Loss.R),
			formatPercent(l.Loss.BadLoss), formatPercent(l.Loss.GoodLoss))
	case LossState:
		add("loss", "state", formatPercent(l.Loss.P13), formatPercent(l.Loss.P31),
			formatPercent(l.Loss.P32), formatPercent(l.Loss.P23), formatPercent(l.Loss.P14))
	}
	pc := func(kw string, p, c float64) {
		if p != 0 {
			add(kw, formatPercent(p))
			if c != 0 {
				add(formatPercent(c))
			}
		}
	}
	pc("duplicate", l.Duplicate, l.DuplicateCorr)
	pc("corrupt", l.Corrupt, l.CorruptCorr)
	pc("reorder", l.Reorder, l.ReorderCorr)
	if l.Reorder != 0 && l.Gap > 1 {
		add("gap", strconv.FormatUint(uint64(l.Gap), 10))
	}
	if l.Rate != 0 {
		add("rate", formatRate(l.Rate))
		if l.CellSize != 0 {
			add(strconv.Itoa(int(l.PacketOverhead)), strconv.FormatUint(uint64(l.CellSize), 10))
			if l.CellOverhead != 0 {
				add(strconv.Itoa(int(l.CellOverhead)))
			}
		} else if l.PacketOverhead != 0 {
			add(strconv.Itoa(int(l.PacketOverhead)))
		}
	}
	if l.Queue == QueueCoDel || l.QueueBytes != 0 {
		if l.Queue == QueueCoDel {
			add("queue", "codel")
		} else {
			add("queue", "droptail")
		}
		if l.QueueBytes != 0 {
			add("bytes", strconv.FormatUint(l.QueueBytes, 10))
		}
		if l.Target != 0 {
			add("target", formatDuration(l.Target))
		}
		if l.Interval != 0 {
			add("interval", formatDuration(l.Interval))
		}
	}
	if l.Trace != "" {
		add("trace", quoteIfNeeded(l.Trace))
	}
	if l.On != 0 || l.Off != 0 {
		add("onoff", formatDuration(l.On), formatDuration(l.Off))
	}
	if l.MTU != 0 {
		add("mtu", strconv.FormatUint(uint64(l.MTU), 10))
		if l.MTUMode != MTUICMP {
			add(l.MTUMode.String())
		}
	}
	if len(b) == 0 {
		return "none"
	}
	return strings.Join(b, " ")
}

// quoteIfNeeded returns s as is when it reads back as one plain token, else
// as a Go-quoted string.
func quoteIfNeeded(s string) string {
	if s == "" || s[0] == '"' {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r == '\\' || r == '"' || !strconv.IsPrint(r) || isSpace(r) || r == 0xFFFD {
			return strconv.Quote(s)
		}
	}
	return s
}

// Validate reports whether l is a Link Parse could have returned: every value
// in range, the combination allowed, and the fields normalized (no
// correlation without its probability, Gap set with Reorder...). Links from
// Parse are always valid; pipeline.New validates what it is given.
func (l Link) Validate() error {
	text := l.String()
	back, err := Parse(text)
	if err != nil {
		return err
	}
	if back != l {
		return &Error{Msg: "a hand-built Link differs from its parsed form " + strconv.Quote(text) +
			" (out-of-range or unnormalized fields, e.g. a correlation without its probability)"}
	}
	return nil
}
