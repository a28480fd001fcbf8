package runner_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/store"
)

// checkChromiumSamples checks a run of the quick plan, whose page test
// headless Chromium loads over real namespaces and the emulated link: the
// run's environment names the browser, every Chromium sample is valid,
// loaded the document and its 10 objects, and every resource used the
// protocol of its cell (nextHopProtocol). It returns the page load times
// per scenario, client and protocol.
func checkChromiumSamples(t *testing.T, db string, ds *model.Dataset) map[string][]float64 {
	t.Helper()
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
	wantProto := map[string]string{"h1": "http/1.1", "h2": "h2", "h3": "h3"}
	browserSamples := 0
	plt := map[string][]float64{}
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if c.Test != "page" || s.Warmup {
			continue
		}
		if s.Status != model.StatusOK {
			t.Errorf("%s #%d: %s: %s", c.Key, s.Iteration, s.Status, s.Error)
			continue
		}
		plt[c.Scenario+"/"+c.Client+"/"+c.Protocol] = append(plt[c.Scenario+"/"+c.Client+"/"+c.Protocol], s.Value)
		if c.Client != "chromium" {
			continue
		}
		browserSamples++
		if len(s.Resources) != 11 {
			t.Errorf("%s #%d: %d resources, want 11 (document + 10 objects)", c.Key, s.Iteration, len(s.Resources))
		}
		for _, r := range s.Resources {
			if r.Protocol != wantProto[c.Protocol] {
				t.Errorf("%s #%d: resource %s used %q, want %q", c.Key, s.Iteration, r.Name, r.Protocol, wantProto[c.Protocol])
			}
		}
	}
	// every counted sample of every Chromium cell (2 scenarios x 3
	// protocols x the plan's iterations)
	want := 0
	for _, c := range ds.Cells {
		if c.Test == "page" && c.Client == "chromium" {
			want += c.Iterations
		}
	}
	if want == 0 || browserSamples != want {
		t.Fatalf("%d valid browser samples, want %d", browserSamples, want)
	}
	return plt
}

// needChromium skips a test when Chromium is not installed.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		testsupport.Unavailable(t, "chromium is not installed (apt-get install chromium)")
	}
}
