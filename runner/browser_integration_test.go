package runner_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/model"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/store"
)

// The quick plan's page test, loaded by headless Chromium and by the
// built-in client over the same links.
const browserPlan = `
name: browser-page
seed: 3
iterations: 2
warmup: false
protocols: [h1, h2, h3]
timeout: 30s
scenarios:
  - name: baseline
  - name: lossy
    link: "delay 25ms loss 1%"
tests:
  - test: page
    client: chromium
    params: {objects: 10, size: 20KB}
  - test: page
    client: builtin
    params: {objects: 10, size: 20KB}
`

// TestChromiumUsesTheProtocolAskedFor checks, over real namespaces and the
// emulated link, that every resource of every valid Chromium sample used
// the protocol of its cell (nextHopProtocol), and that no sample was
// invalid or failed.
func TestChromiumUsesTheProtocolAskedFor(t *testing.T) {
	needRoot(t)
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	p, err := plan.Parse("browser.yaml", []byte(browserPlan))
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "browser.db")
	runPlan(t, p, db, 0)
	ds := load(t, db)
	checkComplete(t, ds)
	// the environment names the browser
	st, err := store.OpenExisting(db)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.RunBrowser(context.Background(), ds.Run.ID)
	st.Close()
	if err != nil || !strings.Contains(b, "Chrome/") {
		t.Errorf("stored browser %q, %v; want Chrome/<version>", b, err)
	}
	cells := map[int64]model.Cell{}
	for _, c := range ds.Cells {
		cells[c.ID] = c
	}
	want := map[string]string{"h1": "http/1.1", "h2": "h2", "h3": "h3"}
	browserSamples := 0
	plt := map[string][]float64{}
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if s.Status != model.StatusOK {
			t.Errorf("%s #%d: %s: %s", c.Key, s.Iteration, s.Status, s.Error)
			continue
		}
		plt[c.Scenario+"/"+c.Client+"/"+c.Protocol] = append(plt[c.Scenario+"/"+c.Client+"/"+c.Protocol], s.Value)
		if c.Client != model.ClientChromium {
			continue
		}
		browserSamples++
		if len(s.Resources) != 11 {
			t.Errorf("%s #%d: %d resources, want 11 (document + 10 objects)", c.Key, s.Iteration, len(s.Resources))
		}
		for _, r := range s.Resources {
			if r.Protocol != want[c.Protocol] {
				t.Errorf("%s #%d: resource %s used %q, want %q", c.Key, s.Iteration, r.Name, r.Protocol, want[c.Protocol])
			}
		}
	}
	if browserSamples != 12 {
		t.Fatalf("%d valid browser samples, want 12", browserSamples)
	}
	t.Logf("page load time (ms) per scenario/client/protocol: %v", plt)
}
