package cli

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// BenchmarkBrowserSampleOverhead measures what a browser page-load sample
// costs the client agent beyond the page load itself, with a fresh browser
// per sample (browser_restart: always, as every sample did before browsers
// were kept) and with a fresh context in the agent's kept browser (auto),
// for Chromium and Firefox, over h2 and h3 on loopback (a 10-object page
// of quicbench's server). Each iteration takes one sample of each mode,
// in alternating order, so that both meet the same machine load; the
// kept browser is started before the timing. It reports the medians, in
// ms, of: prep (before the navigation: the browser's start and/or the
// context's creation), wall (the page load as the sample measures it,
// navigation to the load event and the timings' read-out), teardown
// (after it: the context's or the browser's close) and overhead (the
// sample's whole time in the agent minus wall), per mode, and the ratio
// of the overheads. Run it with e.g. -benchtime 20x.
func BenchmarkBrowserSampleOverhead(b *testing.B) {
	for _, client := range []string{"chromium", "firefox"} {
		for _, proto := range []string{model.ProtoH2, model.ProtoH3} {
			b.Run(client+"/"+proto, func(b *testing.B) {
				if client == "chromium" {
					requireChromiumCLI(b)
				} else {
					requireFirefoxCLI(b)
				}
				benchOverhead(b, client, proto)
			})
		}
	}
}

// phases are one mode's per-sample times, and its samples that were not
// ok, which are counted and left out of the times: on a saturated machine
// a fresh Firefox asked for h3 sometimes loaded over h2 (invalid), or did
// not start within its 20 s (failed).
type phases struct {
	prep, wall, teardown, overhead []time.Duration
	notOK                          int
}

func benchOverhead(b *testing.B, client, proto string) {
	_, target := browserTestbed(b)
	ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{})}
	b.Cleanup(func() { closeClients(ex.Clients) })
	req := func(restart string) workload.Request {
		return workload.Request{Test: plan.TestPage, Protocol: proto, Client: client, Target: target, Timeout: 60 * time.Second,
			BrowserRestart: restart, Params: testParams(plan.TestPage, map[string]string{"objects": "10", "size": "8KB"})}
	}
	sample := func(restart string, into *phases) {
		t0 := time.Now()
		res := ex.Execute(context.Background(), req(restart))
		took := time.Since(t0)
		if res.Status != model.StatusOK {
			into.notOK++
			b.Logf("%s: %s: %s", restart, res.Status, res.Error)
			return
		}
		into.prep = append(into.prep, res.Prep)
		into.wall = append(into.wall, res.Wall)
		into.teardown = append(into.teardown, took-res.Prep-res.Wall)
		into.overhead = append(into.overhead, took-res.Wall)
	}
	var warm phases
	sample(browser.RestartAuto, &warm) // starts the kept browser
	var fresh, kept phases
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			sample(browser.RestartAlways, &fresh)
			sample(browser.RestartAuto, &kept)
		} else {
			sample(browser.RestartAuto, &kept)
			sample(browser.RestartAlways, &fresh)
		}
		i++
	}
	med := func(d []time.Duration) float64 {
		if len(d) == 0 {
			return 0 // no sample ok: the _not_ok count says so
		}
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2]) / float64(time.Millisecond)
	}
	for _, m := range []struct {
		name string
		p    phases
	}{{"fresh", fresh}, {"context", kept}} {
		b.ReportMetric(med(m.p.prep), m.name+"_prep_ms")
		b.ReportMetric(med(m.p.wall), m.name+"_wall_ms")
		b.ReportMetric(med(m.p.teardown), m.name+"_teardown_ms")
		b.ReportMetric(med(m.p.overhead), m.name+"_overhead_ms")
		b.ReportMetric(float64(m.p.notOK), m.name+"_not_ok")
	}
	b.ReportMetric(med(kept.overhead)/med(fresh.overhead), "context/fresh")
}
