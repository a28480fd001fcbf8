package cli

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// browserTestbed starts the real endpoint server on loopback for browser
// samples and points TMPDIR, where the browsers' profiles go, at a fresh
// directory, which it returns.
func browserTestbed(t testing.TB) (profiles string, target workload.Target) {
	t.Helper()
	profiles = t.TempDir()
	t.Setenv("TMPDIR", profiles)
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	info := srv.Info()
	return profiles, workload.Target{Host: "127.0.0.1", Port: info.Port, PlainPort: info.PlainPort, CAPEM: info.CAPEM, SPKI: info.SPKI}
}

// assertNoProfiles fails the test when a browser profile is left in dir:
// every sample's browser must have removed its own, and no Chromium may
// have been launched by Lighthouse's chrome-launcher (whose profiles are
// lighthouse.* directories in TMPDIR).
func assertNoProfiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "qb-chromium-") || strings.HasPrefix(e.Name(), "lighthouse.") {
			t.Errorf("profile %s left behind", e.Name())
		}
	}
}

// TestBrowserLoaderConnection takes page samples in real Chromium through
// the agent's executor over loopback: a cold sample's document comes over a
// new connection, a warm sample's measured load over one the priming load
// opened (DevTools' connectionReused, which a cold load never reports).
// Both record the browser's start as the sample's preparation.
func TestBrowserLoaderConnection(t *testing.T) {
	requireChromiumCLI(t)
	profiles, target := browserTestbed(t)
	ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{})}
	defer closeClients(ex.Clients) // on every path (a no-op once closed)
	const objects = 4
	alpn := map[string]string{model.ProtoH1: "http/1.1", model.ProtoH2: "h2", model.ProtoH3: "h3"}
	for _, c := range []struct{ proto, conn string }{
		{model.ProtoH2, plan.ConnCold},
		{model.ProtoH2, plan.ConnWarm},
		{model.ProtoH3, plan.ConnCold},
		{model.ProtoH3, plan.ConnWarm},
		{model.ProtoH1, plan.ConnWarm},
	} {
		t.Run(c.proto+"/"+c.conn, func(t *testing.T) {
			start := time.Now()
			res := ex.Execute(context.Background(), workload.Request{
				Test: plan.TestPage, Protocol: c.proto, Client: "chromium", Target: target,
				Params:  testParams(plan.TestPage, map[string]string{"objects": "4", "size": "2KB", "connection": c.conn}),
				Timeout: 20 * time.Second,
			})
			took := time.Since(start)
			if res.Status != model.StatusOK {
				t.Fatalf("status %s: %s", res.Status, res.Error)
			}
			// The browser's start (and, warm, the priming load) precede the
			// measured load: preparation, within the sample's time.
			if res.Prep <= 0 || res.Wall <= 0 || res.Prep+res.Wall > took {
				t.Errorf("prep %v, wall %v, sample %v", res.Prep, res.Wall, took)
			}
			wantReused := 0.0
			if c.conn == plan.ConnWarm {
				wantReused = 1
			}
			if got, ok := res.Metrics["connection_reused"]; !ok || got != wantReused {
				t.Errorf("connection_reused = %v (present %v), want %v", got, ok, wantReused)
			}
			if len(res.Resources) != 1+objects || res.Metrics["resources"] != 1+objects {
				t.Errorf("%d resources, want %d: %+v", len(res.Resources), 1+objects, res.Resources)
			}
			for _, r := range res.Resources {
				if r.Protocol != alpn[c.proto] {
					t.Errorf("resource %s used %q, want %q", r.Name, r.Protocol, alpn[c.proto])
				}
			}
			if res.Negotiated.ALPN != alpn[c.proto] || res.Metrics["plt_ms"] <= 0 || res.Metrics["ttfb_ms"] <= 0 {
				t.Errorf("negotiated %+v, metrics %v", res.Negotiated, res.Metrics)
			}
			// The measured load fetched every object again (cache disabled),
			// and for warm the bytes of both loads are counted.
			if tb := res.Metrics["transfer_bytes"]; tb < objects*2000 || res.Metrics["cached_resources"] != 0 {
				t.Errorf("transfer_bytes %v, cached_resources %v", tb, res.Metrics["cached_resources"])
			}
			if c.conn == plan.ConnWarm && float64(res.Bytes) < 2*res.Metrics["transfer_bytes"]*0.9 {
				t.Errorf("bytes %d for a warm sample whose measured load moved %v", res.Bytes, res.Metrics["transfer_bytes"])
			}
		})
	}
	// An unknown connection fails the sample without starting a browser.
	res := ex.Execute(context.Background(), workload.Request{
		Test: plan.TestPage, Protocol: model.ProtoH2, Client: "chromium", Target: target,
		Params: testParams(plan.TestPage, map[string]string{"connection": "hot"}),
	})
	if res.Status != model.StatusFailed || !strings.Contains(res.Error, `connection "hot"`) {
		t.Errorf("connection hot: status %s, error %q", res.Status, res.Error)
	}
	closeClients(ex.Clients)
	assertNoProfiles(t, profiles)
}

// testParams decodes page parameters as a plan writes them, the defaults
// for those not given; a value the page test does not accept is left for
// the agent to refuse.
func testParams(test string, values map[string]string) plan.Params {
	p, _ := plan.DecodeParams(test, values)
	return p
}
