package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/lighthouse"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// TestLighthouseLoader takes page samples with the real Lighthouse CLI in
// real Chromium through the agent's executor over loopback, over h2 and h3:
// every metric and both scores are recorded, every request of the page
// used the sample's protocol, and nothing of the browser is left.
func TestLighthouseLoader(t *testing.T) {
	requireChromiumCLI(t)
	if _, err := lighthouse.Find(); err != nil {
		testsupport.Unavailable(t, "Lighthouse is not installed (%v): skipping", err)
	}
	profiles, target := browserTestbed(t)
	ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{})}
	const objects = 4
	for _, proto := range []string{model.ProtoH2, model.ProtoH3} {
		t.Run(proto, func(t *testing.T) {
			start := time.Now()
			res := ex.Execute(context.Background(), workload.Request{
				Test: plan.TestPage, Protocol: proto, Client: "lighthouse", Target: target,
				Params:  testParams(plan.TestPage, map[string]string{"objects": "4", "size": "20KB"}),
				Timeout: 2 * time.Minute,
			})
			took := time.Since(start)
			if res.Status != model.StatusOK {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			for _, k := range []string{"lh_fcp_ms", "lh_si_ms", "lh_lcp_ms", "lh_tti_ms", "lh_tbt_ms", "lh_cls", "lh_score", "lh_study_score", "plt_ms", "dcl_ms"} {
				if _, ok := res.Metrics[k]; !ok {
					t.Errorf("metric %s missing: %v", k, res.Metrics)
				}
			}
			m := res.Metrics
			if !(m["lh_fcp_ms"] > 0 && m["lh_fcp_ms"] <= m["lh_lcp_ms"] && m["dcl_ms"] <= m["plt_ms"]) {
				t.Errorf("metrics out of order: %v", m)
			}
			for _, k := range []string{"lh_score", "lh_study_score"} {
				if m[k] < 0 || m[k] > 100 {
					t.Errorf("%s = %v, want 0..100", k, m[k])
				}
			}
			want := map[string]string{model.ProtoH2: "h2", model.ProtoH3: "h3"}[proto]
			if len(res.Resources) != 1+objects || m["resources"] != 1+objects {
				t.Errorf("%d resources (metric %v), want %d: %+v", len(res.Resources), m["resources"], 1+objects, res.Resources)
			}
			for _, r := range res.Resources {
				if r.Protocol != want || !strings.HasPrefix(r.Name, "/") || r.End < r.Start {
					t.Errorf("resource %+v: want protocol %s, a path, end >= start", r, want)
				}
			}
			if res.Negotiated.ALPN != want || res.Bytes < objects*20000 || m["transfer_bytes"] != float64(res.Bytes) {
				t.Errorf("negotiated %+v, bytes %d, transfer_bytes %v", res.Negotiated, res.Bytes, m["transfer_bytes"])
			}
			if res.Prep <= 0 || res.Wall <= 0 || res.Prep+res.Wall > took {
				t.Errorf("prep %v, wall %v, sample %v", res.Prep, res.Wall, took)
			}
			if res.CPU.ClientUser <= 0 {
				t.Errorf("no CPU time of node and Chromium recorded: %+v", res.CPU)
			}
		})
	}
	assertNoProfiles(t, profiles)
}
