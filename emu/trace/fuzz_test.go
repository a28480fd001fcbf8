package trace

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// FuzzParse checks that the trace parser never panics, that its errors are
// *Error values naming a line that exists, and that what it accepts writes
// back and re-parses identically.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1\n", "0\n0\n5\n", "", "0\n", "5\n3\n", "-1\n", "abc\n", "1\r\n2\r\n", "\n\n7\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Parse(bytes.NewReader(data), "fuzz")
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error", err)
			}
			lines := bytes.Count(data, []byte{'\n'}) + 1
			if e.Line < 0 || e.Line > lines || e.Msg == "" || e.File != "fuzz" {
				t.Fatalf("bad error %+v for %d lines", e, lines)
			}
			return
		}
		var buf bytes.Buffer
		if _, err := tr.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := Parse(&buf, "again")
		if err != nil {
			t.Fatalf("written trace does not parse: %v", err)
		}
		if !slices.Equal(back.Timestamps(), tr.Timestamps()) {
			t.Fatal("round trip changed the timestamps")
		}
		if tr.MeanBps() == 0 && uint64(tr.Len())*MTU*8*1000 >= tr.Timestamps()[tr.Len()-1] {
			t.Fatal("MeanBps is 0 for a trace with capacity")
		}
		_ = tr.PeakBps(0)
	})
}
