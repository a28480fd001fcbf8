package plan

import (
	"errors"
	"strconv"
	"strings"

	"github.com/quicbench/quicbench/emu/spec"
)

// specErr is a link spec problem: the byte offset in the spec text of the
// token it concerns (pos < 0 when unknown), that token and the emulator
// parser's message.
type specErr struct {
	pos   int
	token string
	msg   string
}

// linkCanon validates a link spec with the emulator's own parser and returns
// its canonical text ("" for no impairment: an empty spec or "none").
func linkCanon(s string) (string, *specErr) {
	if strings.TrimSpace(s) == "" {
		return "", nil
	}
	l, err := spec.Parse(s)
	if err != nil {
		var se *spec.Error
		if errors.As(err, &se) {
			return "", &specErr{pos: tokenOffset(s, se.Pos), token: se.Token, msg: se.Msg}
		}
		return "", &specErr{pos: -1, msg: err.Error()}
	}
	if c := l.String(); c != "none" {
		return c, nil
	}
	return "", nil
}

// tokenOffset returns the byte offset of the n-th (1-based) whitespace
// separated token of s, or -1. Quoted tokens holding spaces make it
// approximate, which only moves an error's column.
func tokenOffset(s string, n int) int {
	if n <= 0 {
		return -1
	}
	k := 0
	for i := 0; i < len(s); i++ {
		if !isSpaceByte(s[i]) && (i == 0 || isSpaceByte(s[i-1])) {
			k++
			if k == n {
				return i
			}
		}
	}
	return -1
}

func isSpaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// specPath writes a file path as one link spec token.
func specPath(p string) string {
	if strings.ContainsAny(p, " \t\r\n\"\\") || strings.HasPrefix(p, "\"") {
		return strconv.Quote(p)
	}
	return p
}
