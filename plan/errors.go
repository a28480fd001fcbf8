package plan

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem found in a plan: where it is, which field, the
// offending value and what is wrong (with what is allowed).
type Error struct {
	File  string // file name given to Parse or Load
	Line  int    // 1-based line, 0 when unknown
	Col   int    // 1-based column, 0 when unknown
	Path  string // field path, e.g. "tests[1].params.size"
	Value string // the offending scalar value, "" for a missing field or a non-scalar
	Msg   string // what is wrong and what is allowed
}

// Error formats the problem as "file:line:col: path: "value": message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Value != "" {
		fmt.Fprintf(&b, "%q: ", e.Value)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ErrorList is every problem found in a plan, in file order. Parse and Load
// return one when a plan is invalid; its message has one problem per line.
type ErrorList []*Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap returns the individual errors (for errors.As and errors.Is).
func (l ErrorList) Unwrap() []error {
	s := make([]error, len(l))
	for i, e := range l {
		s[i] = e
	}
	return s
}

func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		if l[i].Line != l[j].Line {
			return l[i].Line < l[j].Line
		}
		return l[i].Col < l[j].Col
	})
	return l
}

// suggest returns ", did you mean "x"?" when word is close to one of the
// allowed words, else "".
func suggest(word string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(strings.ToLower(word), a); d < bestD {
			best, bestD = a, d
		}
	}
	if best == "" || bestD == 2 && len(word) < 6 {
		return ""
	}
	return fmt.Sprintf(", did you mean %q?", best)
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		return 99
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
