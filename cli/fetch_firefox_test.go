package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// requireFirefoxCLI ends the test when Firefox or certutil is missing.
func requireFirefoxCLI(t testing.TB) {
	t.Helper()
	if _, err := firefox.FindExe(""); err != nil {
		testsupport.Unavailable(t, "%v: skipping the real-browser test", err)
	}
	if _, err := exec.LookPath("certutil"); err != nil {
		testsupport.Unavailable(t, "certutil is not installed (libnss3-tools): skipping the real-browser test")
	}
}

// TestFetchFirefoxCLI: fetch --client firefox over h3 trusting --ca (JSON:
// every resource over h3), and over h2 with --insecure (the text summary).
func TestFetchFirefoxCLI(t *testing.T) {
	requireFirefoxCLI(t)
	t.Setenv("TMPDIR", t.TempDir())
	info, _ := serveControlled(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(info.CAPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "https://127.0.0.1:" + strconv.Itoa(info.Port)
	code, out, errs := runEndpointCLI(t, nil, "fetch", "--client", "firefox", "--proto", "h3", "--json", "--ca", caFile, base+"/page/4/2KB")
	if code != 0 {
		t.Fatalf("h3: exit %d\n%s\n%s", code, out, errs)
	}
	var res chromiumJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("h3: --json output: %v\n%s", err, out)
	}
	if res.Error != "" || res.Protocol != "h3" || res.Status != 200 || res.Negotiated.ALPN != "h3" || res.Load <= 0 || len(res.Resources) != 5 {
		t.Errorf("h3: result %+v", res)
	}
	for _, r := range res.Resources {
		if r.Protocol != "h3" {
			t.Errorf("h3: resource %s used %q", r.Name, r.Protocol)
		}
	}
	code, out, errs = runEndpointCLI(t, nil, "fetch", "--client", "firefox", "--proto", "h2", "--insecure", base+"/page/2/1KB")
	if code != 0 || !strings.Contains(out, "firefox h2 "+base+"/page/2/1KB (Firefox/") || !strings.Contains(out, "DOMContentLoaded") || !strings.Contains(out, "3 resources") {
		t.Errorf("h2: exit %d\n%s\n%s", code, out, errs)
	}
	if left, _ := filepath.Glob(filepath.Join(os.Getenv("TMPDIR"), "qb-firefox-*")); len(left) > 0 {
		t.Errorf("profiles left behind: %v", left)
	}
}

func TestFetchFirefoxCLIUsageErrors(t *testing.T) {
	const u = "https://127.0.0.1:1/page/1/1KB"
	cases := map[string][]string{
		"not raw quic streams":                      {"fetch", "--client", "firefox", "--proto", "quic", "--insecure", u},
		"--spki does not apply to --client firefox": {"fetch", "--client", "firefox", "--spki", "M2QEPkFMcriEn0Rfhgob6UMArUmXYkH4i9WxddB/cAM=", u},
		"--warm does not apply":                     {"fetch", "--client", "firefox", "--warm", "--insecure", u},
		"exclude each other":                        {"fetch", "--client", "firefox", "--ca", "x.pem", "--insecure", u},
		"--ca: open":                                {"fetch", "--client", "firefox", "--ca", "/nonexistent/ca.pem", u},
	}
	for want, args := range cases {
		code, _, errs := runEndpointCLI(t, strings.NewReader(""), args...)
		if code != ExitUsage || !strings.Contains(errs, want) {
			t.Errorf("%v: exit %d, stderr %q; want usage error containing %q", args, code, errs, want)
		}
	}
}

// TestFirefoxLoaderConnection takes page samples in real Firefox through
// the agent's executor: a warm sample's measured load reuses the priming
// load's connection and fetches everything again over h3; a cold h2
// sample opens its own connection.
func TestFirefoxLoaderConnection(t *testing.T) {
	requireFirefoxCLI(t)
	profiles, target := browserTestbed(t)
	ex := &workload.Executor{Clients: workload.Clients(workload.ClientEnv{})}
	defer closeClients(ex.Clients) // on every path (a no-op once closed)
	for _, c := range []struct {
		proto, conn string
		reused      float64
	}{{model.ProtoH3, plan.ConnWarm, 1}, {model.ProtoH2, plan.ConnCold, 0}} {
		start := time.Now()
		res := ex.Execute(context.Background(), workload.Request{
			Test: plan.TestPage, Protocol: c.proto, Client: "firefox", Target: target,
			Params:  testParams(plan.TestPage, map[string]string{"objects": "4", "size": "2KB", "connection": c.conn}),
			Timeout: 20 * time.Second,
		})
		took := time.Since(start)
		if res.Status != model.StatusOK {
			t.Fatalf("%s %s: status %s: %s", c.proto, c.conn, res.Status, res.Error)
		}
		if got, ok := res.Metrics["connection_reused"]; !ok || got != c.reused {
			t.Errorf("%s %s: connection_reused = %v (present %v), want %v", c.proto, c.conn, got, ok, c.reused)
		}
		if len(res.Resources) != 5 || res.Metrics["plt_ms"] <= 0 || res.Metrics["transfer_bytes"] < 4*2000 || res.Negotiated.ALPN != c.proto {
			t.Errorf("%s %s: %d resources, metrics %v, negotiated %+v", c.proto, c.conn, len(res.Resources), res.Metrics, res.Negotiated)
		}
		for _, r := range res.Resources {
			if r.Protocol != c.proto {
				t.Errorf("%s %s: resource %s used %q", c.proto, c.conn, r.Name, r.Protocol)
			}
		}
		if res.Prep <= 0 || res.Wall <= 0 || res.Prep+res.Wall > took || res.CPU.ClientUser <= 0 {
			t.Errorf("%s %s: prep %v, wall %v, sample %v, CPU %+v", c.proto, c.conn, res.Prep, res.Wall, took, res.CPU)
		}
	}
	closeClients(ex.Clients)
	if left, _ := filepath.Glob(filepath.Join(profiles, "qb-firefox-*")); len(left) > 0 {
		t.Errorf("profiles left behind: %v", left)
	}
	// Without a Firefox loader the sample fails and names the client.
	res := (&workload.Executor{}).Execute(context.Background(), workload.Request{
		Test: plan.TestPage, Protocol: model.ProtoH2, Client: "firefox", Target: target,
		Params: testParams(plan.TestPage, nil),
	})
	if res.Status != model.StatusFailed || !strings.Contains(res.Error, "client firefox: not available") {
		t.Errorf("no loader: %s %q", res.Status, res.Error)
	}
}
