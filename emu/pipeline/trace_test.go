package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/emu/trace"
	"github.com/quicbench/quicbench/internal/testsupport"
)

func traceLink(t *testing.T, content, extra string) (*Pipeline, *emu.Pool) {
	t.Helper()
	return build(t, fmt.Sprintf("trace %s %s", writeTrace(t, content), extra), 1)
}

func TestTraceOneOpportunityPerMillisecond(t *testing.T) {
	// "1" is one 1500-byte opportunity per millisecond from the first packet.
	p, pool := traceLink(t, "1\n", "")
	got := drive(t, p, pool, every(10, 0, 0, 1500), true)
	equalTimes(t, "trace 1", deliveryTimes(got), []emu.Time{1 * ms, 2 * ms, 3 * ms, 4 * ms, 5 * ms, 6 * ms, 7 * ms, 8 * ms, 9 * ms, 10 * ms})
}

func TestTraceSmallPacketsShareAnOpportunity(t *testing.T) {
	p, pool := traceLink(t, "1\n", "")
	got := drive(t, p, pool, every(6, 0, 0, 750), true)
	equalTimes(t, "750-byte packets", deliveryTimes(got), []emu.Time{1 * ms, 1 * ms, 2 * ms, 2 * ms, 3 * ms, 3 * ms})
	// A packet larger than what is left waits for the next opportunity,
	// keeping the remainder: 100 + 1500 + 1400 bytes fit exactly in two
	// opportunities, the last two packets leaving together with the second.
	p, pool = traceLink(t, "1\n", "")
	got = drive(t, p, pool, []arrival{{0, 0, 100}, {0, 1, 1500}, {0, 2, 1400}}, true)
	equalTimes(t, "100+1500+1400", deliveryTimes(got), []emu.Time{1 * ms, 2 * ms, 2 * ms})
}

func TestTraceUnusedCapacityIsLost(t *testing.T) {
	// Nothing queued for 5 ms: those opportunities are gone, the burst at
	// 5.5 ms gets the opportunities at 6 and 7 ms, one packet each.
	p, pool := traceLink(t, "1\n", "")
	arr := []arrival{{0, 0, 100}, {5*ms + 500*us, 1, 1500}, {5*ms + 500*us, 2, 1500}}
	got := drive(t, p, pool, arr, true)
	equalTimes(t, "idle", deliveryTimes(got), []emu.Time{1 * ms, 6 * ms, 7 * ms})
}

func TestTraceWrapsAround(t *testing.T) {
	// Opportunities at 0, 0 and 5 ms, repeating every 5 ms: 0,0,5 | 5,5,10 | 10,10,15.
	p, pool := traceLink(t, "0\n0\n5\n", "")
	got := drive(t, p, pool, every(9, 0, 0, 1500), true)
	equalTimes(t, "wrap", deliveryTimes(got), []emu.Time{0, 0, 5 * ms, 5 * ms, 5 * ms, 10 * ms, 10 * ms, 10 * ms, 15 * ms})
}

func TestTraceWithDelayAndQueue(t *testing.T) {
	p, pool := traceLink(t, "2\n", "limit 3")
	got := drive(t, p, pool, every(10, 0, 0, 1500), true)
	// All ten arrive at 0 and none leaves before the first opportunity at
	// 2 ms: the queue holds 3 and drops 7.
	equalTimes(t, "limit 3", deliveryTimes(got), []emu.Time{2 * ms, 4 * ms, 6 * ms})
	if p.Counters().DropQueue != 7 {
		t.Fatalf("DropQueue %d, want 7", p.Counters().DropQueue)
	}
	p, pool = build(t, fmt.Sprintf("delay 10ms trace %s", writeTrace(t, "1\n")), 1)
	got = drive(t, p, pool, every(3, 0, 0, 1500), true)
	equalTimes(t, "trace+delay", deliveryTimes(got), []emu.Time{11 * ms, 12 * ms, 13 * ms})
}

// TestRealTraceSchedule saturates a real cellular trace: every delivery
// must happen exactly at one of the file's opportunities.
func TestRealTraceSchedule(t *testing.T) {
	file := testsupport.TracePath(t, "TMobile-LTE-short.up")
	tr, err := trace.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	ts := tr.Timestamps()
	p, pool := build(t, fmt.Sprintf("trace %q limit 100000", file), 1)
	got := drive(t, p, pool, every(5000, 0, 0, 1500), true)
	for i, d := range got {
		if want := emu.Time(ts[i]) * ms; d.at != want {
			t.Fatalf("delivery %d at %d, want the trace's opportunity %d", i, d.at, want)
		}
	}
}

func TestBadTraceIsAnError(t *testing.T) {
	for content, want := range map[string]string{
		"":        "empty",
		"5\n3\n":  ":2: timestamp 3 is before the previous one",
		"x\n":     `:1: "x" is not a timestamp`,
		"-1\n":    ":1: timestamp -1 is negative",
		"0\n0\n0": "every timestamp is 0",
	} {
		l, err := spec.Parse("trace " + writeTrace(t, content))
		if err != nil {
			t.Fatal(err)
		}
		_, err = New(l, 1, newTestPool())
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "link.trace") {
			t.Errorf("trace %q: error %v, want one naming the file and %q", content, err, want)
		}
	}
	l, _ := spec.Parse("trace /nonexistent/trace.up")
	if _, err := New(l, 1, newTestPool()); err == nil || !strings.Contains(err.Error(), "/nonexistent/trace.up") {
		t.Errorf("missing trace: %v", err)
	}
}
