package runner

import (
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

func TestETAFromEstimate(t *testing.T) {
	s, m, h := time.Second, time.Minute, time.Hour
	for _, tc := range []struct {
		name                                 string
		measured, estimated, remaining, want time.Duration
		slots                                int
	}{
		{"before any sample: the plain estimate", 0, 0, 3 * h, 3 * h, 1},
		{"no estimate for the samples taken yet", 10 * s, 0, 3 * h, 3 * h, 1},
		{"as estimated", 10 * m, 10 * m, 2 * h, 2 * h, 1},
		{"twice as slow as estimated", 20 * m, 10 * m, 2 * h, 4 * h, 1},
		{"faster than estimated", 3 * m, 4 * m, 4 * h, 3 * h, 1},
		{"far slower: ratio clamped at 5", 100 * s, 1 * s, 1 * h, 5 * h, 1},
		{"far faster: ratio clamped at 0.2", 1 * s, 100 * s, 1 * h, 12 * m, 1},
		{"nothing left", 10 * m, 5 * m, 0, 0, 0},
		{"4 testbeds, before any sample: a quarter", 0, 0, 4 * h, h, 4},
		{"16 testbeds, 10x faster: below the serial clamp", 1 * m, 10 * m, 10 * h, h, 16},
		{"16 testbeds, far faster: clamped at 0.2/16", 1 * s, 1000 * s, 16 * h, 12 * m, 16},
	} {
		if got := etaFrom(tc.measured, tc.estimated, tc.remaining, tc.slots); got != tc.want {
			t.Errorf("%s: etaFrom(%v, %v, %v) = %v, want %v", tc.name, tc.measured, tc.estimated, tc.remaining, got, tc.want)
		}
	}
	if got := etaMean(10*s, 5, 7); got != 14*s {
		t.Errorf("etaMean = %v, want 14s", got)
	}
	if got := etaMean(10*s, 0, 7); got != 0 {
		t.Errorf("etaMean before any sample = %v, want 0", got)
	}
}

func TestProgressStartEstimate(t *testing.T) {
	for _, tc := range []struct {
		mode        ProgressMode
		todo, total int
		slots       int
		want        string
	}{
		{ProgressLines, 5900, 5900, 1, "estimated duration: 12h (5900 samples)\n"},
		{ProgressBar, 2361, 5900, 1, "estimated duration: 12h (2361 of 5900 samples left)\n"},
		{ProgressLines, 1, 1, 0, "estimated duration: 12h (1 sample)\n"},
		{ProgressLines, 5900, 5900, 16, "estimated duration: 1h8m on up to 16 testbeds at once, 12h one at a time (5900 samples)\n"},
		{ProgressJSON, 5900, 5900, 16, ""}, // one record per sample, no start event
		{ProgressQuiet, 5900, 5900, 1, ""},
	} {
		var b strings.Builder
		p := newProgress(&b, tc.mode)
		p.slots = tc.slots
		p.start(tc.todo, tc.total, 12*time.Hour+10*time.Minute, time.Hour+8*time.Minute)
		if b.String() != tc.want {
			t.Errorf("mode %d: %q, want %q", tc.mode, b.String(), tc.want)
		}
	}
}

func TestProgressSampleEstimates(t *testing.T) {
	p, err := plan.Parse("e.yaml", []byte("protocols: [h2, h3]\nscenarios: [{name: a, link: \"delay 10ms\"}]\ntests: [{test: ttfb}, {test: download}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	cells, _ := p.Expand()
	est := sampleEstimates(p, cells)
	if len(est) != len(cells) {
		t.Fatalf("%d estimates for %d cells", len(est), len(cells))
	}
	for i := range cells {
		want, _ := p.EstimateCell(&cells[i])
		if est[cells[i].Key] != want || want <= 0 {
			t.Errorf("%s: %v, want %v", cells[i].Key, est[cells[i].Key], want)
		}
	}
	bad := append([]model.Cell(nil), cells...)
	bad[1].LinkDown = "delay soon"
	if est := sampleEstimates(p, bad); est != nil {
		t.Errorf("a cell with a bad link spec: %v, want nil (the ETA falls back to the mean)", est)
	}
	if est := sampleEstimates(nil, cells); est != nil {
		t.Errorf("no plan: %v", est)
	}
}

func TestETAAlongTheReplay(t *testing.T) {
	m := time.Minute
	// The replay of a run whose first sample (10 min) runs alone, then 10
	// samples of 10 min at once: 20 min in all, 110 min of work.
	ends := []sampleEnd{{10 * m, 10 * m}}
	for range 10 {
		ends = append(ends, sampleEnd{20 * m, 10 * m})
	}
	c := newProgressCurve(ends)
	if c.end() != 20*m {
		t.Fatalf("curve ends at %v, want 20m", c.end())
	}
	for _, tc := range []struct {
		name          string
		elapsed, done time.Duration
		want          time.Duration
	}{
		{"before any sample: the whole replay", 0, 0, 20 * m},
		{"the lone sample done, as replayed", 10 * m, 10 * m, 10 * m},
		{"the lone sample done, twice as slow", 20 * m, 10 * m, 20 * m},
		{"one of the ten parallel samples, as replayed", 20 * m, 20 * m, 0},
		{"half the lone sample's work: where it ends", 5 * m, 5 * m, 5 * m},
		{"far slower: ratio clamped at 5", 100 * m, 10 * m, 50 * m},
		{"far faster: ratio clamped at 0.2", 1 * m, 10 * m, 2 * m},
		{"all done", 20 * m, 110 * m, 0},
	} {
		if got := etaCurve(tc.elapsed, tc.done, c); got != tc.want {
			t.Errorf("%s: etaCurve(%v, %v) = %v, want %v", tc.name, tc.elapsed, tc.done, got, tc.want)
		}
	}
	// The serial ETA of the same run, scaling the work left by the pace so
	// far, says 10 x too much after the lone sample: what the replay mends.
	if got := etaFrom(10*m, 10*m, 100*m, 11); got != 100*m {
		t.Errorf("etaFrom after the lone sample = %v, want 100m (the serial scaling)", got)
	}
	// Four samples of 7 min at once: the first one's end is the replay's
	// end (its work is counted when it ends, as the run counts it), not a
	// quarter of the way, which read 21 min in a run of 7.
	four := newProgressCurve([]sampleEnd{{7 * m, 7 * m}, {7 * m, 7 * m}, {7 * m, 7 * m}, {7 * m, 7 * m}})
	if got := etaCurve(7*m, 7*m, four); got != 0 {
		t.Errorf("four at once, the first done: ETA %v, want 0", got)
	}
	// Samples of a block, one after the other.
	chain := newProgressCurve([]sampleEnd{{2 * m, 2 * m}, {4 * m, 2 * m}, {6 * m, 2 * m}})
	if got := etaCurve(6*m, 4*m, chain); got != 3*m {
		t.Errorf("two of three chained samples, 1.5 x slower: ETA %v, want 3m", got)
	}
}
