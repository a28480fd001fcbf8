package report

import (
	"strconv"
	"strings"
)

// Validity warnings carry counts and durations ("TUN device queues
// overflowed: 12 packets dropped ..."), so that a stored sample says
// exactly what happened. The report groups them by shape, the text with
// every number taken out, so that a run whose samples each dropped a
// different number of packets shows one row, not one per count; the row
// shows each number that varies as its range over the group
// ("declared 72–1715 packets lost").

// warnToken is one piece of a warning: text, or a number (num true).
type warnToken struct {
	text string
	num  bool
	val  float64
}

// tokenizeWarning splits w into text and numbers. A number is a run of
// digits, with at most one decimal point inside, that does not continue a
// word, a number or a dotted name (so "h3", "10.1.2.2" and "x_2" stay text).
func tokenizeWarning(w string) []warnToken {
	var toks []warnToken
	start := 0 // start of the pending text
	for i := 0; i < len(w); {
		if !isDigit(w[i]) || (i > 0 && continuesWord(w[i-1])) {
			i++
			continue
		}
		j := i
		for j < len(w) && isDigit(w[j]) {
			j++
		}
		if j+1 < len(w) && w[j] == '.' && isDigit(w[j+1]) {
			j++
			for j < len(w) && isDigit(w[j]) {
				j++
			}
		}
		if j+1 < len(w) && w[j] == '.' && isDigit(w[j+1]) {
			// a dotted sequence such as an address: text
			for j < len(w) && (isDigit(w[j]) || w[j] == '.') {
				j++
			}
			i = j
			continue
		}
		v, err := strconv.ParseFloat(w[i:j], 64)
		if err != nil {
			i = j
			continue
		}
		if start < i {
			toks = append(toks, warnToken{text: w[start:i]})
		}
		toks = append(toks, warnToken{text: w[i:j], num: true, val: v})
		start, i = j, j
	}
	if start < len(w) {
		toks = append(toks, warnToken{text: w[start:]})
	}
	return toks
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func continuesWord(c byte) bool {
	return isDigit(c) || c == '.' || c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// warningShape is w with every number replaced by "#": the grouping key.
func warningShape(toks []warnToken) string {
	var b strings.Builder
	for _, t := range toks {
		if t.num {
			b.WriteByte('#')
		} else {
			b.WriteString(t.text)
		}
	}
	return b.String()
}

// warnRange accumulates the warnings of one shape: per number position,
// the smallest and the largest value seen, as written.
type warnRange struct {
	toks     []warnToken // the first warning's tokens
	min, max []warnToken // per token index; set for numbers only
}

func newWarnRange(toks []warnToken) *warnRange {
	r := &warnRange{toks: toks, min: make([]warnToken, len(toks)), max: make([]warnToken, len(toks))}
	copy(r.min, toks)
	copy(r.max, toks)
	return r
}

// add takes in another warning of the same shape (same tokens, numbers
// aside).
func (r *warnRange) add(toks []warnToken) {
	for i, t := range toks {
		if !t.num || i >= len(r.toks) {
			continue
		}
		if t.val < r.min[i].val {
			r.min[i] = t
		}
		if t.val > r.max[i].val {
			r.max[i] = t
		}
	}
}

// text is the group's warning: each number that varied as "min–max".
func (r *warnRange) text() string {
	var b strings.Builder
	for i, t := range r.toks {
		switch {
		case !t.num:
			b.WriteString(t.text)
		case r.min[i].val == r.max[i].val:
			b.WriteString(r.min[i].text)
		default:
			b.WriteString(r.min[i].text + "–" + r.max[i].text)
		}
	}
	return b.String()
}
