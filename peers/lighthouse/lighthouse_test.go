package lighthouse

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	lh "github.com/quicbench/quicbench/lighthouse"
	"github.com/quicbench/quicbench/workload"
)

// TestFillLighthouse: the score is stored in whole points, and the
// resources' times count from the earliest request's start, whichever
// place it has in Lighthouse's record order.
func TestFillLighthouse(t *testing.T) {
	rep := &lh.Report{
		Score: 0.29, StudyScore: 0.5,
		MetricScores: map[string]float64{},
		Requests: []lh.Request{
			{URL: "https://127.0.0.1:4433/page/", Protocol: "h3", StartMs: 5, EndMs: 9, Finished: true},
			{URL: "https://127.0.0.1:4433/early.css", Protocol: "h3", StartMs: 2, EndMs: 4, Finished: true},
			{URL: "https://127.0.0.1:4433/late.js", Protocol: "h3", StartMs: 12.5, EndMs: 11, Finished: true},
		},
	}
	for _, id := range lh.MetricAudits() {
		rep.MetricScores[id] = 1
	}
	res := &workload.Result{Metrics: map[string]float64{}}
	fillLighthouse(res, rep, "https://127.0.0.1:4433/page/")
	// 100 * 0.29 is 28.999999999999996 in floating point.
	if got := res.Metrics["lh_score"]; got != 29 {
		t.Errorf("lh_score = %v, want 29", got)
	}
	if got := res.Metrics["lh_study_score"]; got != 50 {
		t.Errorf("lh_study_score = %v, want 50", got)
	}
	want := []struct {
		name             string
		start, ttfb, end int64
	}{
		{"/page/", 3e6, 7e6, 7e6},
		{"/early.css", 0, 2e6, 2e6},
		{"/late.js", 10.5e6, 10.5e6, 10.5e6}, // an end before the start is the start
	}
	if len(res.Resources) != len(want) {
		t.Fatalf("%d resources: %+v", len(res.Resources), res.Resources)
	}
	for i, w := range want {
		r := res.Resources[i]
		if r.Name != w.name || r.Start != w.start || r.TTFB != w.ttfb || r.End != w.end {
			t.Errorf("resource %d: %+v, want %s start %d, first byte %d, end %d", i, r, w.name, w.start, w.ttfb, w.end)
		}
	}
}

// TestLighthouseWait: the wait for the load is what the timeout leaves
// after the browser's start and Lighthouse's work after the load; a
// timeout that leaves too little is refused with a message naming the
// timeout given and the one needed.
func TestLighthouseWait(t *testing.T) {
	if lighthouseMinLoad != 10*time.Second {
		t.Errorf("lighthouseMinLoad = %v, want 10s (minTimeout = 30 s after the load + 10 s + 1 s for the browser's start)", lighthouseMinLoad)
	}
	if w, err := lighthouseWait(minTimeout, 500*time.Millisecond); err != nil || w != 10500*time.Millisecond {
		t.Errorf("minimum timeout, fast start: %v, %v; want 10.5s", w, err)
	}
	if w, err := lighthouseWait(2*time.Minute, 2*time.Second); err != nil || w != 88*time.Second {
		t.Errorf("2m timeout: %v, %v; want 1m28s", w, err)
	}
	_, err := lighthouseWait(minTimeout, 2200*time.Millisecond)
	want := "client lighthouse: the sample's timeout of 41s, less the browser's start (2.2s) and the 30s Lighthouse needs after the load, leaves 8.8s for the page's load, less than the 10s minimum: give the test a timeout of at least 43s"
	if err == nil || err.Error() != want {
		t.Errorf("slow start: %v\nwant %s", err, want)
	}
	_, err = lighthouseWait(20*time.Second, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "timeout of 20s,") || !strings.HasSuffix(err.Error(), "at least 41s") {
		t.Errorf("short timeout: %v", err)
	}
}

// TestLighthouseLoaderFindsOnce: Lighthouse is looked for at the first
// sample only; its error fails every sample.
func TestLighthouseLoaderFindsOnce(t *testing.T) {
	calls := 0
	errMissing := errors.New("not installed")
	load := newLighthouseLoader(func() (lh.Install, error) {
		calls++
		return lh.Install{}, errMissing
	})
	for i := 0; i < 3; i++ {
		if _, err := load(context.Background(), workload.Request{}, "https://127.0.0.1/"); !errors.Is(err, errMissing) {
			t.Errorf("sample %d: %v, want the finder's error", i, err)
		}
	}
	if calls != 1 {
		t.Errorf("Lighthouse looked for %d times, want once", calls)
	}
}
