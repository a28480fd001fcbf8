package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Error is a link spec error. Pos is the 1-based index of the offending
// token among the spec's whitespace-separated tokens (a quoted string is one
// token); Token is that token's text. For a missing argument, Pos and Token
// name the keyword that needs it.
type Error struct {
	Spec  string // which spec it is in: "" for Parse, or the ParseDirections argument name
	Pos   int
	Token string
	Msg   string
}

// Error formats e as `link spec: token 2 "-5ms": delay must not be negative`.
func (e *Error) Error() string {
	prefix := "link spec"
	if e.Spec != "" {
		prefix += " (" + e.Spec + ")"
	}
	if e.Pos == 0 {
		return prefix + ": " + e.Msg
	}
	return fmt.Sprintf("%s: token %d %s: %s", prefix, e.Pos, strconv.Quote(e.Token), e.Msg)
}

func isSpace(r rune) bool { return unicode.IsSpace(r) }

type token struct {
	text string
	pos  int // 1-based
}

// tokenize splits s at whitespace; a token starting with '"' is a Go-quoted
// string (for trace paths with spaces) and must be followed by whitespace or
// the end.
func tokenize(s string) ([]token, error) {
	var toks []token
	i := 0
	for {
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !isSpace(r) {
				break
			}
			i += n
		}
		if i >= len(s) {
			return toks, nil
		}
		pos := len(toks) + 1
		if s[i] == '"' {
			q, err := strconv.QuotedPrefix(s[i:])
			if err != nil {
				return nil, &Error{Pos: pos, Token: s[i:], Msg: "unterminated or invalid quoted string"}
			}
			text, _ := strconv.Unquote(q)
			i += len(q)
			if i < len(s) {
				if r, _ := utf8.DecodeRuneInString(s[i:]); !isSpace(r) {
					return nil, &Error{Pos: pos, Token: q, Msg: "a quoted string must be followed by a space"}
				}
			}
			toks = append(toks, token{text, pos})
			continue
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if isSpace(r) {
				break
			}
			j += n
		}
		toks = append(toks, token{s[i:j], pos})
		i = j
	}
}

// Parse parses one direction's link spec. The empty string (or only
// whitespace) and "none" are the perfect link. Errors are *Error values.
func Parse(s string) (Link, error) {
	toks, err := tokenize(s)
	if err != nil {
		return Link{}, err
	}
	p := &parser{toks: toks, seen: map[string]token{}}
	l, err := p.parse()
	if err != nil {
		return Link{}, err
	}
	return l, nil
}

type parser struct {
	toks []token
	i    int
	seen map[string]token // keyword -> where it was given
	l    Link
}

func (p *parser) errAt(t token, format string, args ...any) error {
	return &Error{Pos: t.pos, Token: t.text, Msg: fmt.Sprintf(format, args...)}
}

// next returns the next token, or an error naming kw when there is none;
// need says what is missing ("a TIME").
func (p *parser) next(kw token, need string) (token, error) {
	if p.i >= len(p.toks) {
		return token{}, p.errAt(kw, "needs %s", need)
	}
	t := p.toks[p.i]
	p.i++
	return t, nil
}

// nextIsNumber reports whether an optional positional argument follows (tc
// checks for a leading digit; signs and points are admitted too so that
// "-1ms" gets a precise error rather than "unknown keyword").
func (p *parser) nextIsNumber() bool {
	if p.i >= len(p.toks) {
		return false
	}
	t := p.toks[p.i].text
	if t == "" {
		return false
	}
	c := t[0]
	return c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+'
}

func (p *parser) once(kw token, key string) error {
	if prev, ok := p.seen[key]; ok {
		return p.errAt(kw, "%s given twice (first as token %d)", key, prev.pos)
	}
	p.seen[key] = kw
	return nil
}

// arg checks that keyword kw (named key) comes once and returns its
// argument; need says what it is ("a TIME").
func (p *parser) arg(kw token, key, need string) (token, error) {
	if err := p.once(kw, key); err != nil {
		return token{}, err
	}
	return p.next(kw, need)
}

// count reads keyword kw's packet count (1 to MaxInt32), once;
// example shows one ("limit 1000").
func (p *parser) count(kw token, key, example string) (uint32, error) {
	t, err := p.arg(kw, key, "a packet count (e.g. "+example+")")
	if err != nil {
		return 0, err
	}
	v, err := parseInt(t.text, 1, math.MaxInt32)
	if err != nil {
		return 0, p.errAt(t, "%s %s", key, err)
	}
	return uint32(v), nil
}

// optInt reads an optional integer in [lo, hi]; ok is false when none
// follows (err nil) or when it is not valid (err says why). name labels
// errors about its value.
func (p *parser) optInt(lo, hi int64, name string) (v int64, t token, ok bool, err error) {
	if !p.nextIsNumber() {
		return 0, t, false, nil
	}
	t = p.toks[p.i]
	p.i++
	if v, err = parseInt(t.text, lo, hi); err != nil {
		return 0, t, false, p.errAt(t, "%s %s", name, err)
	}
	return v, t, true, nil
}

// optPercents reads optional percentages into params in turn, as long as
// numbers follow; names label them in errors.
func (p *parser) optPercents(kw token, names []string, params ...*float64) error {
	for i, f := range params {
		if !p.nextIsNumber() {
			break
		}
		v, err := p.percent(kw, names[i])
		if err != nil {
			return err
		}
		*f = v
	}
	return nil
}

// duration reads a non-negative time; name labels errors about its value.
func (p *parser) duration(kw token, name, need string) (time.Duration, token, error) {
	t, err := p.next(kw, need)
	if err != nil {
		return 0, t, err
	}
	d, err := parseDuration(t.text)
	if err != nil {
		return 0, t, p.errAt(t, "%s %s", name, err)
	}
	if d < 0 {
		return 0, t, p.errAt(t, "%s must not be negative", name)
	}
	return d, t, nil
}

// percent reads a percentage; name labels errors about its value.
func (p *parser) percent(kw token, name string) (float64, error) {
	t, err := p.next(kw, "a PERCENT ("+name+")")
	if err != nil {
		return 0, err
	}
	v, err := parsePercent(t.text)
	if err != nil {
		return 0, p.errAt(t, "%s %s", name, err)
	}
	return v, nil
}

func (p *parser) optPercent(kw token, name string) (float64, error) {
	if !p.nextIsNumber() {
		return 0, nil
	}
	return p.percent(kw, name)
}

var keywords = "limit, delay, distribution, loss, duplicate, corrupt, reorder, gap, rate, queue, trace, onoff, mtu, none"

func (p *parser) parse() (Link, error) {
	for p.i < len(p.toks) {
		kw := p.toks[p.i]
		p.i++
		var err error
		switch k := strings.ToLower(kw.text); k {
		case "none":
			if len(p.toks) != 1 {
				return Link{}, p.errAt(kw, "none cannot be combined with other keywords")
			}
			return Link{}, nil
		case "limit":
			err = p.parseLimit(kw)
		case "delay", "latency":
			err = p.parseDelay(kw)
		case "distribution":
			err = p.parseDistribution(kw)
		case "loss", "drop":
			err = p.parseLoss(kw)
		case "duplicate":
			err = p.parseProbCorr(kw, "duplicate", &p.l.Duplicate, &p.l.DuplicateCorr)
		case "corrupt":
			err = p.parseProbCorr(kw, "corrupt", &p.l.Corrupt, &p.l.CorruptCorr)
		case "reorder":
			err = p.parseProbCorr(kw, "reorder", &p.l.Reorder, &p.l.ReorderCorr)
		case "gap":
			err = p.parseGap(kw)
		case "rate":
			err = p.parseRate(kw)
		case "queue":
			err = p.parseQueue(kw)
		case "trace":
			err = p.parseTrace(kw)
		case "onoff":
			err = p.parseOnOff(kw)
		case "mtu":
			err = p.parseMTU(kw)
		case "ecn", "slot":
			err = p.errAt(kw, "netem's %s is not supported (see docs/link-spec.md)", k)
		case "seed":
			err = p.errAt(kw, "the seed is not part of a link spec: it is set per run (e.g. --seed)")
		case "bytes", "target", "interval":
			err = p.errAt(kw, "%s belongs to a queue: write queue droptail|codel %s ...", k, k)
		case "random", "gemodel", "state":
			err = p.errAt(kw, "%s belongs to loss: write loss %s ...", k, k)
		case "icmp", "blackhole":
			err = p.errAt(kw, "%s belongs to mtu: write mtu BYTES %s", k, k)
		default:
			if p.nextIsNumberAt(p.i - 1) {
				err = p.errAt(kw, "unexpected value: every value follows a keyword (%s)", keywords)
			} else {
				err = p.errAt(kw, "unknown keyword (want one of %s)", keywords)
			}
		}
		if err != nil {
			return Link{}, err
		}
	}
	if err := p.check(); err != nil {
		return Link{}, err
	}
	return p.l, nil
}

func (p *parser) nextIsNumberAt(i int) bool {
	save := p.i
	p.i = i
	ok := p.nextIsNumber()
	p.i = save
	return ok
}

func (p *parser) parseLimit(kw token) (err error) {
	p.l.Limit, err = p.count(kw, "limit", "limit 1000")
	return err
}

func (p *parser) parseDelay(kw token) error {
	if err := p.once(kw, "delay"); err != nil {
		return err
	}
	d, _, err := p.duration(kw, "delay", "a TIME (e.g. delay 25ms)")
	if err != nil {
		return err
	}
	p.l.Delay = d
	if !p.nextIsNumber() {
		return nil
	}
	if p.l.Jitter, _, err = p.duration(kw, "jitter", ""); err != nil {
		return err
	}
	p.l.DelayCorr, err = p.optPercent(kw, "delay correlation")
	return err
}

func (p *parser) parseDistribution(kw token) error {
	t, err := p.arg(kw, "distribution", "a name (uniform, normal, pareto or paretonormal)")
	if err != nil {
		return err
	}
	for i, n := range distNames {
		if strings.EqualFold(t.text, n) {
			p.l.Distribution = Distribution(i)
			return nil
		}
	}
	return p.errAt(t, "unknown distribution (want uniform, normal, pareto or paretonormal; table files are not supported)")
}

func (p *parser) parseLoss(kw token) error {
	if err := p.once(kw, "loss"); err != nil {
		return err
	}
	if p.i < len(p.toks) && !p.nextIsNumber() {
		model := p.toks[p.i]
		switch strings.ToLower(model.text) {
		case "random":
			p.i++
		case "gemodel":
			p.i++
			return p.parseGemodel(model)
		case "state":
			p.i++
			return p.parseState(model)
		default:
			return p.errAt(model, "unknown loss model (want a percentage, random, gemodel or state)")
		}
	}
	v, err := p.percent(kw, "loss")
	if err != nil {
		return err
	}
	c, err := p.optPercent(kw, "loss correlation")
	if err != nil {
		return err
	}
	if v != 0 {
		p.l.Loss = Loss{Model: LossRandom, Percent: v, Correlation: c}
	}
	return nil
}

func (p *parser) parseGemodel(kw token) error {
	l := Loss{Model: LossGemodel, BadLoss: 100}
	var err error
	if l.P, err = p.percent(kw, "gemodel P"); err != nil {
		return err
	}
	l.R = 100 - l.P // tc's default since iproute2 5.1: a Bernoulli model
	if err := p.optPercents(kw, []string{"gemodel R", "gemodel 1-H", "gemodel 1-K"}, &l.R, &l.BadLoss, &l.GoodLoss); err != nil {
		return err
	}
	p.l.Loss = l
	return nil
}

func (p *parser) parseState(kw token) error {
	l := Loss{Model: LossState, P23: 100}
	var err error
	if l.P13, err = p.percent(kw, "state P13"); err != nil {
		return err
	}
	l.P31 = 100 - l.P13 // tc's defaults
	if err := p.optPercents(kw, []string{"state P31", "state P32", "state P23", "state P14"}, &l.P31, &l.P32, &l.P23, &l.P14); err != nil {
		return err
	}
	if l.P13+l.P14 > 100 {
		return p.errAt(kw, "state P13 + P14 must not exceed 100%%")
	}
	if l.P31+l.P32 > 100 {
		return p.errAt(kw, "state P31 + P32 must not exceed 100%%")
	}
	p.l.Loss = l
	return nil
}

func (p *parser) parseProbCorr(kw token, name string, prob, corr *float64) error {
	if err := p.once(kw, name); err != nil {
		return err
	}
	v, err := p.percent(kw, name)
	if err != nil {
		return err
	}
	c, err := p.optPercent(kw, name+" correlation")
	if err != nil {
		return err
	}
	if v != 0 {
		*prob, *corr = v, c
	}
	return nil
}

func (p *parser) parseGap(kw token) (err error) {
	p.l.Gap, err = p.count(kw, "gap", "gap 5")
	return err
}

func (p *parser) parseRate(kw token) error {
	t, err := p.arg(kw, "rate", "a RATE (e.g. 10mbit)")
	if err != nil {
		return err
	}
	if p.l.Rate, err = parseRate(t.text); err != nil {
		return p.errAt(t, "rate %s", err)
	}
	v, _, ok, err := p.optInt(-65535, 65535, "rate packet overhead (bytes)")
	if !ok {
		return err
	}
	p.l.PacketOverhead = int32(v)
	if v, _, ok, err = p.optInt(0, 65535, "rate cell size (bytes)"); !ok {
		return err
	}
	p.l.CellSize = uint32(v)
	if v, t, ok, err = p.optInt(-1024, 1024, "rate cell overhead (bytes)"); !ok {
		return err
	}
	if p.l.CellSize == 0 && v != 0 {
		return p.errAt(t, "rate cell overhead needs a non-zero cell size")
	}
	if v != 0 && int64(p.l.CellSize)+v <= 0 {
		return p.errAt(t, "rate cell overhead must leave cells a positive size")
	}
	p.l.CellOverhead = int32(v)
	return nil
}

func (p *parser) parseQueue(kw token) error {
	t, err := p.arg(kw, "queue", "a discipline (droptail or codel)")
	if err != nil {
		return err
	}
	switch strings.ToLower(t.text) {
	case "droptail":
		p.l.Queue = QueueDropTail
	case "codel":
		p.l.Queue = QueueCoDel
	default:
		return p.errAt(t, "unknown queue discipline (want droptail or codel)")
	}
	for p.i < len(p.toks) {
		sub := p.toks[p.i]
		switch k := strings.ToLower(sub.text); k {
		case "bytes":
			p.i++
			v, err := p.arg(sub, "bytes", "a SIZE in bytes (e.g. bytes 150000)")
			if err != nil {
				return err
			}
			if p.l.QueueBytes, err = parseSize(v.text); err != nil {
				return p.errAt(v, "queue bytes %s", err)
			}
		case "target", "interval":
			p.i++
			if err := p.once(sub, k); err != nil {
				return err
			}
			if p.l.Queue != QueueCoDel {
				return p.errAt(sub, "%s is a codel parameter (write queue codel %s ...)", k, k)
			}
			d, v, err := p.duration(sub, "codel "+k, "a TIME")
			if err != nil {
				return err
			}
			if d == 0 {
				return p.errAt(v, "codel %s must be positive", k)
			}
			if k == "target" {
				p.l.Target = d
			} else {
				p.l.Interval = d
			}
		default:
			return nil
		}
	}
	return nil
}

func (p *parser) parseTrace(kw token) error {
	t, err := p.arg(kw, "trace", "a FILE (a mahimahi trace)")
	if err != nil {
		return err
	}
	if t.text == "" {
		return p.errAt(t, "trace file name is empty")
	}
	p.l.Trace = t.text
	return nil
}

func (p *parser) parseOnOff(kw token) error {
	if err := p.once(kw, "onoff"); err != nil {
		return err
	}
	on, t, err := p.duration(kw, "onoff ON time", "an ON and an OFF TIME (e.g. onoff 10s 2s)")
	if err != nil {
		return err
	}
	if on == 0 {
		return p.errAt(t, "onoff ON time must be positive")
	}
	off, t, err := p.duration(kw, "onoff OFF time", "an OFF TIME after the ON time (e.g. onoff 10s 2s)")
	if err != nil {
		return err
	}
	if off == 0 {
		return p.errAt(t, "onoff OFF time must be positive (leave onoff out for no blackout)")
	}
	p.l.On, p.l.Off = on, off
	return nil
}

func (p *parser) parseMTU(kw token) error {
	t, err := p.arg(kw, "mtu", fmt.Sprintf("a size in bytes, %d to %d (e.g. mtu 1280)", MinMTU, MaxMTU))
	if err != nil {
		return err
	}
	v, err := parseInt(t.text, MinMTU, MaxMTU)
	if err != nil {
		return p.errAt(t, "mtu %s (%d is IPv4's minimum, %d the testbed devices' MTU)", err, MinMTU, MaxMTU)
	}
	p.l.MTU = uint32(v)
	if p.i < len(p.toks) {
		switch strings.ToLower(p.toks[p.i].text) {
		case "icmp":
			p.l.MTUMode = MTUICMP
			p.i++
		case "blackhole":
			p.l.MTUMode = MTUBlackhole
			p.i++
		}
	}
	return nil
}

// check applies the rules that involve several keywords, and normalizes.
func (p *parser) check() error {
	l := &p.l
	if l.Jitter == 0 {
		l.DelayCorr = 0
		if t, ok := p.seen["distribution"]; ok {
			return p.errAt(t, "distribution needs a jitter (delay TIME JITTER distribution ...)")
		}
	}
	if gap, ok := p.seen["gap"]; ok && l.Reorder == 0 {
		return p.errAt(gap, "gap needs a reorder probability (reorder PERCENT gap N)")
	}
	if l.Reorder != 0 {
		if l.Delay == 0 && l.Jitter == 0 {
			return p.errAt(p.seen["reorder"], "reorder needs a delay: reordered packets are the ones sent without it")
		}
		if l.Gap == 0 {
			l.Gap = 1
		}
	}
	if l.Rate != 0 && l.Trace != "" {
		return p.errAt(p.seen["trace"], "trace and rate both set the link's capacity; use one")
	}
	if q, ok := p.seen["queue"]; ok && l.Rate == 0 && l.Trace == "" {
		return p.errAt(q, "queue needs a rate or trace: without a bottleneck no queue forms")
	}
	return nil
}
