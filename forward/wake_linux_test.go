package forward

import (
	"testing"

	"github.com/quicbench/quicbench/emu"
)

func TestWakerPlan(t *testing.T) {
	const now = emu.Time(1_000_000_000)
	near := emu.Time(maxSleep + maxAdvance - 1) // the furthest departure waited for
	for _, tc := range []struct {
		name    string
		advance int64
		d       emu.Time
		ok      bool
		want    wakePlan
	}{
		{"empty pipeline", 0, 0, false, wakePlan{action: wakeSleep, timeout: maxSleep}},
		{"far departure", 0, now + emu.Time(maxSleep+maxAdvance), true, wakePlan{action: wakeSleep, timeout: maxSleep}},
		{"furthest timed", 0, now + near, true, wakePlan{action: wakeSleep, timeout: int64(near), timed: true, wakeAt: now + near, due: now + near}},
		{"due now", 0, now, true, wakePlan{action: wakeServe}},
		{"overdue", 0, now - 1, true, wakePlan{action: wakeServe}},
		{"overdue by far", 0, now - emu.Time(maxSleep)*100, true, wakePlan{action: wakeServe}},
		{"in 5 us", 0, now + 5000, true, wakePlan{action: wakeSleep, timeout: 5000, timed: true, wakeAt: now + 5000, due: now + 5000}},
		{"in 1 ns", 0, now + 1, true, wakePlan{action: wakeSleep, timeout: 1, timed: true, wakeAt: now + 1, due: now + 1}},
		{"advance 40 us, in 50 us", 40_000, now + 50_000, true, wakePlan{action: wakeSleep, timeout: 10_000, timed: true, wakeAt: now + 10_000, due: now + 50_000}},
		{"advance 40 us, in 40 us", 40_000, now + 40_000, true, wakePlan{action: wakeSpin, due: now + 40_000}},
		{"advance 40 us, in 30 us", 40_000, now + 30_000, true, wakePlan{action: wakeSpin, due: now + 30_000}},
		{"advance 100 us, in 10 ms", maxAdvance, now + 10_000_000, true, wakePlan{action: wakeSleep, timeout: 10_000_000 - maxAdvance, timed: true, wakeAt: now + 10_000_000 - emu.Time(maxAdvance), due: now + 10_000_000}},
	} {
		w := waker{adaptive: true, advance: tc.advance}
		if got := w.plan(now, tc.d, tc.ok); got != tc.want {
			t.Errorf("%s: plan %+v, want %+v", tc.name, got, tc.want)
		}
		if w.advance != tc.advance {
			t.Errorf("%s: plan changed the advance", tc.name)
		}
	}
}

func TestWakerAdvanceFollowsLatency(t *testing.T) {
	pl := wakePlan{action: wakeSleep, timed: true, wakeAt: 1000, due: 1000}
	w := waker{adaptive: true}
	// Exact steps of the 1/16 exponential average.
	for i, want := range []int64{2500, 4843, 7040} {
		w.timedOut(pl, pl.wakeAt+40_000)
		if w.advance != want {
			t.Fatalf("step %d: advance %d, want %d", i, w.advance, want)
		}
	}
	// Samples are clamped to [0, maxAdvance].
	w = waker{adaptive: true}
	w.timedOut(pl, pl.wakeAt+emu.Time(maxAdvance)*1000)
	if w.advance != maxAdvance/16 {
		t.Fatalf("huge latency: advance %d, want %d", w.advance, maxAdvance/16)
	}
	w = waker{adaptive: true, advance: 1600}
	w.timedOut(pl, pl.wakeAt-500) // woke early: a 0 sample
	if w.advance != 1500 {
		t.Fatalf("early wake-up: advance %d, want 1500", w.advance)
	}
	// Without TimerAdvance nothing is learnt.
	w = waker{}
	w.timedOut(pl, pl.wakeAt+40_000)
	if w.advance != 0 {
		t.Fatalf("advance %d without TimerAdvance", w.advance)
	}
}

// TestWakerConvergence drives the waker as the forwarding thread does,
// against a simulated kernel that always wakes the thread 30 us after the
// time asked, and departures 1 ms apart: with TimerAdvance the thread learns
// to ask earlier and its lateness falls under 16 ns (the average's integer
// resolution); without it, every departure is served 30 us late.
func TestWakerConvergence(t *testing.T) {
	const latency = 30_000
	run := func(adaptive bool) (first, last uint64, w waker) {
		w = waker{adaptive: adaptive}
		now := emu.Time(0)
		for i := 1; i <= 300; i++ {
			d := emu.Time(i) * 1_000_000
			pl := w.plan(now, d, true)
			switch pl.action {
			case wakeServe, wakeSpin:
				t.Fatalf("departure %d: %+v with %d ns to go", i, pl, d-now)
			}
			if !pl.timed || pl.timeout != int64(pl.wakeAt-now) {
				t.Fatalf("departure %d: plan %+v", i, pl)
			}
			now = pl.wakeAt + latency // the kernel's wake-up
			w.timedOut(pl, now)
			now = max(now, pl.due) // spinUntil
			late := lateness(pl.due, now)
			if i == 1 {
				first = late
			}
			last = late
		}
		return first, last, w
	}
	first, last, w := run(true)
	if first != latency || last >= 16 || w.advance <= latency-16 || w.advance > latency {
		t.Fatalf("adaptive: first %d ns late, last %d ns late, advance %d", first, last, w.advance)
	}
	first, last, w = run(false)
	if first != latency || last != latency || w.advance != 0 {
		t.Fatalf("fixed: first %d ns late, last %d ns late, advance %d", first, last, w.advance)
	}
}

func TestDueBy(t *testing.T) {
	if dueBy(10, 11, true) || !dueBy(10, 10, true) || !dueBy(10, 9, true) || dueBy(10, 0, false) {
		t.Fatal("dueBy")
	}
}

// TestReadState follows the forwarding loop's read decisions through the
// sequences it meets, one read system call at a time.
func TestReadState(t *testing.T) {
	type step struct {
		op   string // "should", "read" (n, flag: empty), "woke" (flag: input ready)
		n    int
		flag bool
		want bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a fresh thread reads", []step{{op: "should", want: true}}},
		{"one arrival: read it, serve, then sleep without a second read", []step{
			{op: "woke", flag: true},
			{op: "should", want: true},
			{op: "read", n: 1, flag: true, want: true},
			{op: "should", want: false},
			{op: "woke", flag: true},
			{op: "should", want: true},
		}},
		{"a batch cut short by a due departure reads again", []step{
			{op: "should", want: true},
			{op: "read", n: 8, flag: false, want: true},
			{op: "should", want: true},
		}},
		{"an empty read plans the sleep", []step{
			{op: "should", want: true},
			{op: "read", n: 0, flag: true, want: false},
			{op: "should", want: true},
		}},
		{"a timed wake-up with the input quiet serves without reading", []step{
			{op: "woke", flag: false},
			{op: "should", want: false},
			{op: "should", want: true}, // the skip holds one pass only
		}},
		{"a failed or interrupted ppoll assumes nothing", []step{
			{op: "read", n: 3, flag: true, want: true},
			{op: "woke", flag: true},
			{op: "should", want: true},
		}},
	} {
		var r readState
		for i, s := range tc.steps {
			var got bool
			switch s.op {
			case "should":
				got = r.shouldRead()
			case "read":
				got = r.read(s.n, s.flag)
			case "woke":
				r.woke(s.flag)
				continue
			}
			if got != s.want {
				t.Errorf("%s: step %d (%s): got %v, want %v", tc.name, i, s.op, got, s.want)
			}
		}
	}
}
