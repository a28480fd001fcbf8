package spec

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error is an *Error
// pointing at a real token, and that whatever parses round-trips through
// String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "none", "delay 25ms", "delay 10ms 5ms 25% distribution normal",
		"loss 1% 25%", "loss gemodel 1% 10% 70% 0.1%", "loss state 2 50 10 20 1",
		"duplicate 1% corrupt 0.1% reorder 25% 50% gap 5 delay 10ms",
		"rate 5kbit 20 100 5 limit 100", "rate 10mbit queue codel bytes 64kb target 10ms interval 200ms",
		`trace "a b" queue droptail bytes 1500`, "onoff 10s 500ms", "delay -5ms", "loss 150%", "rate 0",
		"delay 1.0000005ms", "rate 1KiBps", "\"\\x00\"", "trace \"\\xff\"",
		"mtu 1280", "mtu 1280 blackhole delay 5ms", "mtu 68 icmp", "mtu 67", "mtu 1280 icmp icmp",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q): error %T is not *Error", s, err)
			}
			if e.Pos < 0 || e.Msg == "" || !strings.HasPrefix(e.Error(), "link spec") {
				t.Fatalf("Parse(%q): malformed error %+v", s, e)
			}
			if e.Pos > 0 {
				toks, terr := tokenize(s)
				if terr == nil && (e.Pos > len(toks) || toks[e.Pos-1].text != e.Token) {
					t.Fatalf("Parse(%q): error names token %d %q, which is not that token", s, e.Pos, e.Token)
				}
			}
			return
		}
		text := l.String()
		again, err := Parse(text)
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", s, text, err)
		}
		if again != l {
			t.Fatalf("round trip of %q via %q:\n  %+v\n  %+v", s, text, l, again)
		}
		if again.String() != text {
			t.Fatalf("String not canonical: %q then %q", text, again.String())
		}
	})
}
