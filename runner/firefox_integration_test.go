package runner_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/stats"
	"github.com/quicbench/quicbench/store"
)

// needFirefox ends a test when Firefox or NSS's certutil is not installed.
func needFirefox(t *testing.T) {
	t.Helper()
	if _, err := firefox.FindExe(""); err != nil {
		testsupport.Unavailable(t, "%v (apt-get install firefox-esr)", err)
	}
	if _, err := exec.LookPath("certutil"); err != nil {
		testsupport.Unavailable(t, "certutil is not installed (apt-get install libnss3-tools)")
	}
}

const firefoxPlan = `
name: firefox
seed: 3
iterations: 2
warmup: false
protocols: [h2, h3]
client: firefox
timeout: 30s
scenarios:
  - name: rtt20
    link: "delay 10ms"
tests:
  - test: page
    params: {objects: 10, size: 8KB}
`

// TestFirefoxPageOverTestbed runs page samples in headless Firefox across
// a real testbed (namespaces, the emulated 20 ms round trip, the real
// server and agent): every sample is valid, the h3 samples fetched the
// document and all 10 objects over h3 (Firefox did not fall back to TCP),
// the h2 samples everything over h2, and the run records Firefox's
// version.
func TestFirefoxPageOverTestbed(t *testing.T) {
	needRoot(t)
	needFirefox(t)
	p, err := plan.Parse("firefox.yaml", []byte(firefoxPlan))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "firefox.db")
	start := time.Now()
	sum := runPlan(t, p, db, 0)
	t.Logf("%d samples in %s", sum.Taken, time.Since(start).Round(time.Millisecond))
	for _, o := range sum.Overheads {
		t.Logf("per-sample overhead, %s: total %s; preparation (browser start) %s; runner's own and teardown %s", o.Client, o.Total, o.Prep, o.Own)
	}
	ds := load(t, db)
	checkComplete(t, ds)
	st, err := store.OpenExisting(db)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.RunBrowser(context.Background(), ds.Run.ID)
	st.Close()
	if err != nil || !strings.HasPrefix(b, "Firefox/") {
		t.Errorf("stored browser %q, %v; want Firefox/<version>", b, err)
	}
	cells := map[int64]model.Cell{}
	for _, c := range ds.Cells {
		cells[c.ID] = c
	}
	want := map[string]string{"h2": "h2", "h3": "h3"}
	plt := map[string][]float64{}
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if s.Status != model.StatusOK {
			t.Errorf("%s #%d: %s: %s", c.Key, s.Iteration, s.Status, s.Error)
			continue
		}
		if len(s.Resources) != 11 {
			t.Errorf("%s #%d: %d resources, want 11 (document + 10 objects)", c.Key, s.Iteration, len(s.Resources))
		}
		for _, r := range s.Resources {
			if r.Protocol != want[c.Protocol] {
				t.Errorf("%s #%d: resource %s used %q, want %q", c.Key, s.Iteration, r.Name, r.Protocol, want[c.Protocol])
			}
		}
		// The emulated round trip is in every load: at least the
		// document's request and response cross the link.
		if s.Metrics["ttfb_ms"] < 20 || s.Value < s.Metrics["ttfb_ms"] {
			t.Errorf("%s #%d: ttfb %v ms, plt %v ms over a 20 ms round trip", c.Key, s.Iteration, s.Metrics["ttfb_ms"], s.Value)
		}
		plt[c.Protocol] = append(plt[c.Protocol], s.Value)
		t.Logf("%s #%d: plt %.1f ms, ttfb %.2f ms, fcp %.1f ms, prep %v, overhead %v, client CPU %v", c.Protocol, s.Iteration, s.Value,
			s.Metrics["ttfb_ms"], s.Metrics["fcp_ms"], s.Prep, s.Overhead, s.CPU.ClientUser+s.CPU.ClientSys)
	}
	for proto, v := range plt {
		t.Logf("page load time %s: median %.1f ms of %d", proto, stats.Median(v), len(v))
	}
}
