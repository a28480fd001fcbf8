package spec

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
)

// number is a decimal literal split into its parts: [sign] digits [. digits]
// followed by a unit suffix made of letters or '%'.
type number struct {
	neg    bool
	digits string // all digits, integer and fraction, without the point
	frac   int    // how many of digits are after the point
	unit   string // the suffix as written
	text   string // the numeric part as written (sign, digits, point)
}

var errNotNumber = errors.New("not a number")

// lexNumber splits tok into a decimal number and its unit suffix. It accepts
// neither exponents, hex, "inf" nor "nan", unlike tc's strtod.
func lexNumber(tok string) (number, error) {
	var n number
	i := 0
	if i < len(tok) && (tok[i] == '+' || tok[i] == '-') {
		n.neg = tok[i] == '-'
		i++
	}
	var b strings.Builder
	seenDigit, seenPoint := false, false
	for ; i < len(tok); i++ {
		c := tok[i]
		if c >= '0' && c <= '9' {
			b.WriteByte(c)
			seenDigit = true
			if seenPoint {
				n.frac++
			}
			continue
		}
		if c == '.' && !seenPoint {
			seenPoint = true
			continue
		}
		break
	}
	if !seenDigit {
		return n, errNotNumber
	}
	n.text = tok[:i]
	n.unit = tok[i:]
	for j := 0; j < len(n.unit); j++ {
		c := n.unit[j]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '%') {
			return n, errNotNumber
		}
	}
	n.digits = strings.TrimLeft(b.String(), "0")
	if len(n.digits) < n.frac { // keep the fraction digits addressable
		n.digits = strings.Repeat("0", n.frac-len(n.digits)) + n.digits
	}
	return n, nil
}

func (n number) isZero() bool { return strings.Trim(n.digits, "0") == "" }

// scaled returns round(value * num / den) as a big integer (value without
// its sign), rounding halves up.
func (n number) scaled(num, den *big.Int) *big.Int {
	v := new(big.Int)
	if n.digits != "" {
		v.SetString(n.digits, 10)
	}
	v.Mul(v, num)
	d := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.frac)), nil)
	d.Mul(d, den)
	q, r := new(big.Int).QuoRem(v, d, new(big.Int))
	if r.Lsh(r, 1).Cmp(d) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// float returns the value as a float64 (sign included).
func (n number) float() float64 {
	f, err := strconv.ParseFloat(n.text, 64)
	if err != nil { // only on overflow; lexNumber admitted the syntax
		return math.Inf(1)
	}
	return f + 0 // turns -0 into +0
}

var timeUnits = map[string]int64{
	"s": 1e9, "sec": 1e9, "secs": 1e9,
	"ms": 1e6, "msec": 1e6, "msecs": 1e6,
	"us": 1e3, "usec": 1e3, "usecs": 1e3,
	"ns": 1, "nsec": 1, "nsecs": 1,
}

// maxDuration bounds every time in a spec, so sums of a few never overflow.
const maxDuration = 24 * time.Hour

// parseDuration parses a tc time: a decimal number with a unit among s, sec,
// secs, ms, msec, msecs, us, usec, usecs, ns, nsec, nsecs (any case). A bare
// number is rejected unless it is 0: tc reads a bare netem time as
// nanoseconds but a bare time elsewhere as microseconds. Negative values are
// returned as such for the caller to reject with a precise message.
func parseDuration(tok string) (time.Duration, error) {
	n, err := lexNumber(tok)
	if err != nil {
		return 0, errors.New("is not a time (want e.g. 25ms, 1.5s, 200us)")
	}
	if n.unit == "" {
		if n.isZero() {
			return 0, nil
		}
		return 0, errors.New("needs a unit (s, ms, us or ns): tc reads a bare number as nanoseconds in netem but microseconds elsewhere")
	}
	mul, ok := timeUnits[strings.ToLower(n.unit)]
	if !ok {
		return 0, errors.New("has an unknown time unit " + strconv.Quote(n.unit) + " (want s, ms, us or ns)")
	}
	v := n.scaled(big.NewInt(mul), big.NewInt(1))
	if !v.IsInt64() || v.Int64() > int64(maxDuration) {
		return 0, errors.New("is too large (at most " + formatDuration(maxDuration) + ")")
	}
	d := time.Duration(v.Int64())
	if n.neg {
		d = -d
	}
	return d, nil
}

// formatDuration prints d exactly, in the largest unit not above it:
// 1500000ns is "1.5ms", 2s is "2s", 0 is "0ms".
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0ms"
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	switch {
	case d >= time.Second:
		return sign + formatDecimal(uint64(d), 1e9) + "s"
	case d >= time.Millisecond:
		return sign + formatDecimal(uint64(d), 1e6) + "ms"
	case d >= time.Microsecond:
		return sign + formatDecimal(uint64(d), 1e3) + "us"
	}
	return sign + strconv.FormatInt(int64(d), 10) + "ns"
}

// formatDecimal prints v/unit exactly (unit a power of ten), without
// trailing zeros in the fraction.
func formatDecimal(v, unit uint64) string {
	s := strconv.FormatUint(v/unit, 10)
	rem := v % unit
	if rem == 0 {
		return s
	}
	width := len(strconv.FormatUint(unit, 10)) - 1
	f := strconv.FormatUint(rem, 10)
	f = strings.Repeat("0", width-len(f)) + f
	return s + "." + strings.TrimRight(f, "0")
}

// rateUnits are tc's rate suffixes (tc_util.c), matched case-insensitively
// as tc does, in bits per second per unit. Note that "bps" is BYTES per
// second, as in tc: kbps = 8000 bit/s.
var rateUnits = map[string]int64{
	"":      1,
	"bit":   1,
	"kibit": 1 << 10, "kbit": 1e3,
	"mibit": 1 << 20, "mbit": 1e6,
	"gibit": 1 << 30, "gbit": 1e9,
	"tibit": 1 << 40, "tbit": 1e12,
	"bps":   8,
	"kibps": 8 << 10, "kbps": 8e3,
	"mibps": 8 << 20, "mbps": 8e6,
	"gibps": 8 << 30, "gbps": 8e9,
	"tibps": 8 << 40, "tbps": 8e12,
}

// maxRate bounds a rate (10 Tbit/s), far above anything a userspace link
// moves, so transmission-time arithmetic cannot overflow.
const maxRate = 10_000_000_000_000

// quantity describes a positive amount with a unit (a rate, a size) for
// parseQuantity: what each error says, the units and the bound.
type quantity struct {
	kind     string           // "rate", "size": "has an unknown <kind> unit"
	notA     string           // error when the token is not a number with a unit
	units    map[string]int64 // lower-case unit -> multiplier
	want     string           // the units an unknown one is told to be
	max      uint64
	tooLarge string
	zero     string // error for an amount of zero
}

// parseQuantity parses tok as q, rounding to the nearest whole unit.
func parseQuantity(tok string, q *quantity) (uint64, error) {
	n, err := lexNumber(tok)
	if err != nil {
		return 0, errors.New(q.notA)
	}
	mul, ok := q.units[strings.ToLower(n.unit)]
	if !ok {
		return 0, errors.New("has an unknown " + q.kind + " unit " + strconv.Quote(n.unit) + " (" + q.want + ")")
	}
	if n.neg && !n.isZero() {
		return 0, errors.New("must not be negative")
	}
	v := n.scaled(big.NewInt(mul), big.NewInt(1))
	if !v.IsUint64() || v.Uint64() > q.max {
		return 0, errors.New(q.tooLarge)
	}
	if v.Sign() == 0 {
		return 0, errors.New(q.zero)
	}
	return v.Uint64(), nil
}

var rateQuantity = quantity{
	kind:     "rate",
	notA:     "is not a rate (want e.g. 10mbit, 1.5gbit, 500kbit)",
	units:    rateUnits,
	want:     "want bit, kbit, mbit, gbit, tbit, their kibit.. forms, or bps, kbps, mbps, gbps for BYTES per second",
	max:      maxRate,
	tooLarge: "is too large (at most 10tbit)",
	zero:     "must be positive (leave rate out for an unlimited link)",
}

// parseRate parses a tc rate into bits per second, rounding to the nearest
// bit/s. A bare number is bits per second, as in tc.
func parseRate(tok string) (uint64, error) { return parseQuantity(tok, &rateQuantity) }

// formatRate prints bits per second exactly with the largest decimal unit
// not above it: 1500000 is "1.5mbit".
func formatRate(bps uint64) string {
	switch {
	case bps >= 1e12:
		return formatDecimal(bps, 1e12) + "tbit"
	case bps >= 1e9:
		return formatDecimal(bps, 1e9) + "gbit"
	case bps >= 1e6:
		return formatDecimal(bps, 1e6) + "mbit"
	case bps >= 1e3:
		return formatDecimal(bps, 1e3) + "kbit"
	}
	return strconv.FormatUint(bps, 10) + "bit"
}

// sizeUnits are tc's size suffixes (get_size), in bytes per unit.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1 << 10,
	"m": 1 << 20, "mb": 1 << 20,
	"g": 1 << 30, "gb": 1 << 30,
	"kbit": 1 << 7, "mbit": 1 << 17, "gbit": 1 << 27,
}

// maxQueueBytes bounds a queue's byte limit (1 GiB).
const maxQueueBytes = 1 << 30

var sizeQuantity = quantity{
	kind:     "size",
	notA:     "is not a size (want bytes, e.g. 150000, 64kb, 1mb)",
	units:    sizeUnits,
	want:     "want b, kb, mb, gb; k = 1024",
	max:      maxQueueBytes,
	tooLarge: "is too large (at most 1gb)",
	zero:     "must be positive",
}

// parseSize parses a tc size into bytes (k = 1024 as in tc).
func parseSize(tok string) (uint64, error) { return parseQuantity(tok, &sizeQuantity) }

// parsePercent parses a percentage: a decimal number with an optional '%'
// (tc reads "1.5" and "1.5%" alike), between 0 and 100.
func parsePercent(tok string) (float64, error) {
	n, err := lexNumber(tok)
	if err != nil || (n.unit != "" && n.unit != "%") {
		return 0, errors.New("is not a percentage (want e.g. 1%, 0.5%, 25%)")
	}
	v := n.float()
	if v < 0 {
		return 0, errors.New("must not be negative")
	}
	if v > 100 {
		return 0, errors.New("must be at most 100%")
	}
	return v, nil
}

// formatPercent prints a percentage exactly (shortest form that parses back
// to the same float64), never in exponent form.
func formatPercent(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64) + "%"
}

// parseInt parses a plain decimal integer within [lo, hi].
func parseInt(tok string, lo, hi int64) (int64, error) {
	n, err := lexNumber(tok)
	if err != nil || n.unit != "" || n.frac > 0 || strings.Contains(n.text, ".") {
		return 0, errors.New("is not an integer")
	}
	v, err := strconv.ParseInt(n.text, 10, 64)
	if err != nil || v < lo || v > hi {
		return 0, errors.New("must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10))
	}
	return v, nil
}
