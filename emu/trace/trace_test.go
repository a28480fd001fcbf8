package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
)

func TestParseValid(t *testing.T) {
	tr, err := Parse(strings.NewReader("0\n0\n5\r\n\n  7 \n10\n"), "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Timestamps(); len(got) != 5 || got[0] != 0 || got[2] != 5 || got[4] != 10 {
		t.Fatalf("Timestamps = %v", got)
	}
	if tr.Len() != 5 || tr.Period() != 10*time.Millisecond || tr.Name() != "t" {
		t.Fatalf("Len %d Period %v Name %q", tr.Len(), tr.Period(), tr.Name())
	}
	// 5 opportunities of 1500 bytes per 10 ms = 6 Mbit/s.
	if tr.MeanBps() != 6_000_000 {
		t.Fatalf("MeanBps = %d", tr.MeanBps())
	}
	// Busiest 1 ms: at 10 ms, the last opportunity of the first period and
	// the two at 0 of the second.
	if got := tr.PeakBps(time.Millisecond); got != 36_000_000 {
		t.Fatalf("PeakBps(1ms) = %d", got)
	}
	// Busiest 5 ms window: [7,12) holds 7, 10 and the next period's two 0s.
	if got := tr.PeakBps(5 * time.Millisecond); got != 4*1500*8*1000/5 {
		t.Fatalf("PeakBps(5ms) = %d", got)
	}
	// 25 ms = two periods (10 opportunities) + 5 ms (4 at most).
	if got := tr.PeakBps(25 * time.Millisecond); got != 14*1500*8*1000/25 {
		t.Fatalf("PeakBps(25ms) = %d", got)
	}
}

func TestOneLineTraceIs12Mbit(t *testing.T) {
	tr, err := Parse(strings.NewReader("1\n"), "one")
	if err != nil {
		t.Fatal(err)
	}
	if tr.MeanBps() != 12_000_000 || tr.PeakBps(100*time.Millisecond) != 12_000_000 {
		t.Fatalf("MeanBps %d PeakBps %d", tr.MeanBps(), tr.PeakBps(100*time.Millisecond))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", "trace f: empty: a trace needs at least one timestamp"},
		{"\n\n  \n", "trace f: empty: a trace needs at least one timestamp"},
		{"0\n0\n", "trace f:2: every timestamp is 0: the last timestamp is the trace's period and must be positive"},
		{"1\n5\n3\n", "trace f:3: timestamp 3 is before the previous one (5 on line 2): timestamps must not decrease"},
		{"1\n\n5\n\n3\n", "trace f:5: timestamp 3 is before the previous one (5 on line 3): timestamps must not decrease"},
		{"1\n-5\n", "trace f:2: timestamp -5 is negative: timestamps are milliseconds from the start, >= 0"},
		{"1\nabc\n", `trace f:2: "abc" is not a timestamp (want a whole number of milliseconds, one per line)`},
		{"1.5\n", `trace f:1: "1.5" is not a timestamp`},
		{"1 2\n", `trace f:1: "1 2" is not a timestamp`},
		{"+3\n", `trace f:1: "+3" is not a timestamp`},
		{"99999999999999999999\n", "trace f:1: timestamp 99999999999999999999 is too large (at most 1000000000000 ms)"},
		{"1000000000001\n", "trace f:1: timestamp 1000000000001 is too large"},
		{"1\n" + strings.Repeat("7", 5000) + "\n", "trace f:2: line longer than 4096 bytes: not a trace"},
	}
	for _, tt := range tests {
		_, err := Parse(strings.NewReader(tt.in), "f")
		if err == nil {
			t.Errorf("Parse(%.30q) succeeded, want %q", tt.in, tt.want)
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%.30q) error %T is not *Error", tt.in, err)
		}
		if !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%.30q) error\n  %s\nwant prefix\n  %s", tt.in, err, tt.want)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x.up")
	if err := os.WriteFile(p, []byte("3\n6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := Load(p)
	if err != nil || tr.Len() != 2 || tr.Name() != p {
		t.Fatalf("Load: %v %v", tr, err)
	}
	_, err = Load(filepath.Join(dir, "missing"))
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "missing: no such file or directory") {
		t.Fatalf("Load(missing): %v", err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "x.up: empty") {
		t.Fatalf("Load(empty file): %v", err)
	}
}

func TestWriteToRoundTrip(t *testing.T) {
	tr, err := New([]uint64{0, 0, 3, 3, 3, 9})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := tr.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if buf.String() != "0\n0\n3\n3\n3\n9\n" {
		t.Fatalf("WriteTo wrote %q", buf.String())
	}
	back, err := Parse(&buf, "b")
	if err != nil || len(back.Timestamps()) != 6 {
		t.Fatalf("re-parse: %v %v", back, err)
	}
}

func TestNewValidates(t *testing.T) {
	for _, ms := range [][]uint64{nil, {0}, {5, 4}, {MaxTimestamp + 1}} {
		if _, err := New(ms); err == nil {
			t.Errorf("New(%v) accepted", ms)
		}
	}
}

// TestRealTraces loads the cellular traces shipped for tests and checks
// their capacity is that of a cellular link (0.1 to 100 Mbit/s on average).
func TestRealTraces(t *testing.T) {
	dir := filepath.Join(testsupport.SharedDir(t), "traces")
	files, _ := filepath.Glob(filepath.Join(dir, "*.up"))
	down, _ := filepath.Glob(filepath.Join(dir, "*.down"))
	files = append(files, down...)
	if len(files) == 0 {
		testsupport.Unavailable(t, "no traces in %s", dir)
	}
	for _, f := range files {
		tr, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if m := tr.MeanBps(); m < 100_000 || m > 100_000_000 {
			t.Errorf("%s: mean %d bit/s is not a cellular link's", f, m)
		}
		if tr.PeakBps(100*time.Millisecond) < tr.MeanBps() {
			t.Errorf("%s: peak below mean", f)
		}
	}
}
