// Package trace reads and writes mahimahi link traces: the time-varying
// capacity of a link as a list of delivery opportunities.
//
// A trace file has one line per opportunity to deliver one 1500-byte packet
// (MTU bytes), holding the opportunity's time in milliseconds from the
// start of the trace as a non-negative integer. Timestamps never decrease; a
// timestamp repeated N times gives N opportunities in that millisecond. The
// last timestamp is the trace's period: the schedule repeats from there, so
// a file holding just "1" is a constant 12 Mbit/s link. Blank lines and a
// trailing "\r" are ignored; anything else is an error naming its line.
package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// MTU is the number of bytes one delivery opportunity carries.
const MTU = 1500

// Limits on what Parse accepts.
const (
	MaxTimestamp = 1_000_000_000_000 // ms (about 31 years)
	MaxLines     = 1 << 26           // opportunities per file
	maxLineLen   = 4096
)

// Error is a trace file error; Line is 1-based, 0 when the error concerns
// the whole file.
type Error struct {
	File string
	Line int
	Msg  string
}

// Error formats e as "trace FILE:LINE: MSG".
func (e *Error) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("trace %s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("trace %s:%d: %s", e.File, e.Line, e.Msg)
}

// Trace is a parsed delivery-opportunity schedule. It is immutable.
type Trace struct {
	name string
	ms   []uint64
}

// Load reads and parses the trace file at path.
func Load(path string) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &Error{File: path, Msg: errText(err)}
	}
	defer f.Close()
	return Parse(f, path)
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Parse reads a trace from r; name labels errors (usually the file name).
func Parse(r io.Reader, name string) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 256), maxLineLen)
	t := &Trace{name: name}
	line := 0
	prevLine := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		v, msg := parseTimestamp(b)
		if msg != "" {
			return nil, &Error{File: name, Line: line, Msg: msg}
		}
		if n := len(t.ms); n > 0 && v < t.ms[n-1] {
			return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf(
				"timestamp %d is before the previous one (%d on line %d): timestamps must not decrease", v, t.ms[n-1], prevLine)}
		}
		if len(t.ms) == MaxLines {
			return nil, &Error{File: name, Line: line, Msg: fmt.Sprintf("too many opportunities (at most %d)", MaxLines)}
		}
		t.ms = append(t.ms, v)
		prevLine = line
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &Error{File: name, Line: line + 1, Msg: fmt.Sprintf("line longer than %d bytes: not a trace", maxLineLen)}
		}
		return nil, &Error{File: name, Line: line, Msg: "read: " + err.Error()}
	}
	if err := t.validate(); err != nil {
		err.File = name
		if err.Line == 0 && prevLine > 0 && len(t.ms) > 0 && t.ms[len(t.ms)-1] == 0 {
			err.Line = prevLine
		}
		return nil, err
	}
	return t, nil
}

func parseTimestamp(b []byte) (uint64, string) {
	s := string(b)
	if len(b) > 0 && b[0] == '-' {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return 0, fmt.Sprintf("timestamp %s is negative: timestamps are milliseconds from the start, >= 0", s)
		}
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Sprintf("%s is not a timestamp (want a whole number of milliseconds, one per line)", strconv.Quote(truncate(s)))
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > MaxTimestamp {
		return 0, fmt.Sprintf("timestamp %s is too large (at most %d ms)", truncate(s), uint64(MaxTimestamp))
	}
	return v, ""
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// New builds a trace from timestamps in milliseconds (copied), with the same
// rules as Parse.
func New(ms []uint64) (*Trace, error) {
	t := &Trace{name: "(memory)", ms: append([]uint64(nil), ms...)}
	for i := range t.ms {
		if t.ms[i] > MaxTimestamp {
			return nil, &Error{File: t.name, Line: i + 1, Msg: fmt.Sprintf("timestamp %d is too large", t.ms[i])}
		}
		if i > 0 && t.ms[i] < t.ms[i-1] {
			return nil, &Error{File: t.name, Line: i + 1, Msg: "timestamps must not decrease"}
		}
	}
	if len(t.ms) > MaxLines {
		return nil, &Error{File: t.name, Msg: "too many opportunities"}
	}
	if err := t.validate(); err != nil {
		err.File = t.name
		return nil, err
	}
	return t, nil
}

func (t *Trace) validate() *Error {
	if len(t.ms) == 0 {
		return &Error{Msg: "empty: a trace needs at least one timestamp"}
	}
	if t.ms[len(t.ms)-1] == 0 {
		return &Error{Msg: "every timestamp is 0: the last timestamp is the trace's period and must be positive"}
	}
	return nil
}

// Name returns the name the trace was parsed under.
func (t *Trace) Name() string { return t.name }

// Len returns the number of delivery opportunities in one period.
func (t *Trace) Len() int { return len(t.ms) }

// Timestamps returns a copy of the opportunities' times in milliseconds.
func (t *Trace) Timestamps() []uint64 { return append([]uint64(nil), t.ms...) }

// Period returns the length of one repetition of the schedule (the last
// timestamp).
func (t *Trace) Period() time.Duration {
	return time.Duration(t.ms[len(t.ms)-1]) * time.Millisecond
}

// MeanBps returns the trace's mean capacity in bits per second.
func (t *Trace) MeanBps() uint64 {
	return uint64(len(t.ms)) * MTU * 8 * 1000 / t.ms[len(t.ms)-1]
}

// PeakBps returns the trace's largest capacity over any window of the given
// length (at least 1 ms; the schedule wraps), in bits per second: what a
// buffer must absorb at most.
func (t *Trace) PeakBps(window time.Duration) uint64 {
	w := uint64(window / time.Millisecond)
	if w < 1 {
		w = 1
	}
	period := t.ms[len(t.ms)-1]
	n := len(t.ms)
	// A window of w = k periods + r holds k*n opportunities plus those of a
	// window of length r, which holds at most n: count those from every
	// start at an opportunity.
	full, r := w/period, w%period
	at := func(i int) uint64 { return t.ms[i%n] + uint64(i/n)*period }
	best := 0
	if r > 0 {
		j := 0
		for i := 0; i < n; i++ {
			j = max(j, i)
			end := at(i) + r
			for j < i+n && at(j) < end {
				j++
			}
			best = max(best, j-i)
		}
	}
	total := full*uint64(n) + uint64(best)
	return total * MTU * 8 * 1000 / w
}

// WriteTo writes the trace in mahimahi format, one timestamp per line.
func (t *Trace) WriteTo(w io.Writer) (int64, error) {
	bw := bufio.NewWriter(w)
	var n int64
	var buf [24]byte
	for _, v := range t.ms {
		b := strconv.AppendUint(buf[:0], v, 10)
		b = append(b, '\n')
		k, err := bw.Write(b)
		n += int64(k)
		if err != nil {
			return n, err
		}
	}
	return n, bw.Flush()
}
