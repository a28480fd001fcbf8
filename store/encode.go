package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// Sample metrics and timeline points are stored as JSON text, which
// SQLite's json_each expands into rows (views sample_metrics and
// timeline_points) and which this file encodes and decodes without
// reflection, exactly (floats in shortest round-trip form). The JSON is
// strict (RFC 8259), so any SQLite version and any JSON reader accepts it:
// NaN is written as null, and infinities as 9e999 and -9e999, which overflow
// to infinity when parsed (SQLite's own spelling of infinity in JSON).
//
//	metrics: {"name": value, ...} (names sorted)
//	points:  [[t_ns, v], [t_ns, v], ...]

// appendMetrics encodes m as a JSON object with sorted keys.
func appendMetrics(b []byte, m map[string]float64) []byte {
	return appendJSONObject(b, m, appendJSONFloat)
}

// appendJSONObject encodes m as a JSON object with sorted keys, each value
// written by appendValue.
func appendJSONObject[V any](b []byte, m map[string]V, appendValue func([]byte, V) []byte) []byte {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendValue(b, m[k])
	}
	return append(b, '}')
}

func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			q, _ := json.Marshal(s) // cannot fail for a string
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// parseMetrics decodes what appendMetrics wrote. intern maps each name to
// the string to use (so equal names share memory); nil keeps them as is.
func parseMetrics(s string, intern func(string) string) (map[string]float64, error) {
	p := jsonParser{s: s}
	if !p.eat('{') {
		return nil, p.fail(errMetrics)
	}
	if p.eat('}') {
		return nil, p.finish(errMetrics)
	}
	m := make(map[string]float64, 8)
	for {
		name, ok := p.str()
		if !ok || !p.eat(':') {
			return nil, p.fail(errMetrics)
		}
		v, ok := p.float()
		if !ok {
			return nil, p.fail(errMetrics)
		}
		if intern != nil {
			name = intern(name)
		}
		m[name] = v
		if p.eat('}') {
			return m, p.finish(errMetrics)
		}
		if !p.eat(',') {
			return nil, p.fail(errMetrics)
		}
	}
}

func appendPoints(b []byte, pts []model.Point) []byte {
	b = append(b, '[')
	for i, p := range pts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, p.T, 10)
		b = append(b, ',')
		b = appendJSONFloat(b, p.V)
		b = append(b, ']')
	}
	return append(b, ']')
}

func appendJSONFloat(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "null"...)
	case math.IsInf(v, 1):
		return append(b, "9e999"...)
	case math.IsInf(v, -1):
		return append(b, "-9e999"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

var (
	errPoints  = errors.New("malformed timeline points")
	errMetrics = errors.New("malformed metrics")
)

// parsePoints decodes what appendPoints wrote; n is the expected number of
// points (a capacity hint and a consistency check).
func parsePoints(s string, n int) ([]model.Point, error) {
	p := jsonParser{s: s}
	if !p.eat('[') {
		return nil, p.fail(errPoints)
	}
	var pts []model.Point
	if n > 0 {
		pts = make([]model.Point, 0, n)
	}
	if p.eat(']') {
		return p.finishPoints(pts, n)
	}
	for {
		if !p.eat('[') {
			return nil, p.fail(errPoints)
		}
		t, ok := p.int()
		if !ok || !p.eat(',') {
			return nil, p.fail(errPoints)
		}
		v, ok := p.float()
		if !ok || !p.eat(']') {
			return nil, p.fail(errPoints)
		}
		pts = append(pts, model.Point{T: t, V: v})
		if p.eat(']') {
			return p.finishPoints(pts, n)
		}
		if !p.eat(',') {
			return nil, p.fail(errPoints)
		}
	}
}

type jsonParser struct {
	s string
	i int
}

func (p *jsonParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\n' || p.s[p.i] == '\t' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonParser) eat(c byte) bool {
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *jsonParser) token() string {
	p.skipSpace()
	j := p.i
	for j < len(p.s) && p.s[j] != ',' && p.s[j] != ']' && p.s[j] != '}' && p.s[j] != ' ' {
		j++
	}
	tok := p.s[p.i:j]
	p.i = j
	return tok
}

func (p *jsonParser) int() (int64, bool) {
	v, err := strconv.ParseInt(p.token(), 10, 64)
	return v, err == nil
}

func (p *jsonParser) float() (float64, bool) {
	tok := p.token()
	switch {
	case tok == "null":
		return math.NaN(), true
	case tok == "" || !strings.ContainsAny(tok[len(tok)-1:], "0123456789"):
		return 0, false // ParseFloat would take "Inf", "NaN", "infinity"
	}
	v, err := strconv.ParseFloat(tok, 64)
	if err != nil && errors.Is(err, strconv.ErrRange) {
		return v, true // 9e999 is +Inf; a value too small to represent is 0
	}
	return v, err == nil
}

// str reads a JSON string.
func (p *jsonParser) str() (string, bool) {
	if !p.eat('"') {
		return "", false
	}
	start, escaped := p.i, false
	for ; p.i < len(p.s); p.i++ {
		switch p.s[p.i] {
		case '\\':
			escaped = true
			p.i++
		case '"':
			raw := p.s[start:p.i]
			p.i++
			if !escaped {
				return raw, true
			}
			var v string
			if err := json.Unmarshal([]byte(p.s[start-1:p.i]), &v); err != nil {
				return "", false
			}
			return v, true
		}
	}
	return "", false
}

func (p *jsonParser) fail(what error) error {
	return fmt.Errorf("%w at byte %d", what, p.i)
}

func (p *jsonParser) finish(what error) error {
	p.skipSpace()
	if p.i != len(p.s) {
		return fmt.Errorf("%w: trailing data at byte %d", what, p.i)
	}
	return nil
}

func (p *jsonParser) finishPoints(pts []model.Point, n int) ([]model.Point, error) {
	if err := p.finish(errPoints); err != nil {
		return nil, err
	}
	if len(pts) != n {
		return nil, fmt.Errorf("%w: %d points, n_points says %d", errPoints, len(pts), n)
	}
	if len(pts) == 0 {
		return nil, nil
	}
	return pts, nil
}
