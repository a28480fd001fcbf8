package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/sites"
)

// writeHAR writes a generated page with missing bodies into dir.
func writeHAR(t *testing.T, dir string, missing int) string {
	t.Helper()
	h, err := sites.BuildPage(sites.PageShape{Name: "p", Origins: 6, Requests: 30, Bytes: 300_000, Missing: missing, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "page.har")
	if err := har.WriteFile(f, h); err != nil {
		t.Fatal(err)
	}
	return f
}

const harPlan = `name: h
protocols: [h2, h3]
client: [builtin, chromium, lighthouse]
server: [quicbench, caddy]
timeout: 60s
%s
scenarios: [{name: base}]
tests:
  - test: site
    params: {site: [page.har, har-6x70]}
`

func loadHARPlan(t *testing.T, dir, extra string) (*Plan, error) {
	t.Helper()
	f := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(f, []byte(strings.Replace(harPlan, "%s", extra, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(f)
}

// A HAR with entries lacking their body is refused with their count and
// bytes, unless missing_bodies: fill, which the plan's notes and hash
// show.
func TestHARSiteMissingBodies(t *testing.T) {
	dir := t.TempDir()
	writeHAR(t, dir, 2)
	_, err := loadHARPlan(t, dir, "")
	if err == nil || !strings.Contains(err.Error(), "2 entries without a body") || !strings.Contains(err.Error(), "missing_bodies: fill") ||
		!strings.Contains(err.Error(), "tests[0].params.site[0]") {
		t.Fatalf("refuse: %v", err)
	}
	p, err := loadHARPlan(t, dir, "missing_bodies: fill")
	if err != nil {
		t.Fatal(err)
	}
	if p.MissingBodies() != MissingFill {
		t.Fatalf("policy %s", p.MissingBodies())
	}
	notes := strings.Join(p.Notes(), "\n")
	for _, want := range []string{"page.har: 30 entries to replay from 6 origins", "2 entries without a body", "filled with bytes of the recorded size",
		"site har-6x70: 70 entries to replay from 6 origins", "server caddy skipped: only quicbench's own server replays",
		"client lighthouse skipped for site"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	cells, _ := p.Expand()
	// builtin and chromium, 2 sites, 2 protocols, quicbench's server only.
	if len(cells) != 8 {
		for _, c := range cells {
			t.Log(c.Key)
		}
		t.Fatalf("%d cells, want 8", len(cells))
	}
	for _, c := range cells {
		if v, _ := c.Factor("site"); v != "har-6x70" && !strings.HasSuffix(v, string(filepath.Separator)+"page.har") {
			t.Errorf("site %q not resolved", v)
		}
	}
	// Filling changes what is measured: another hash; the canonical text
	// keeps the policy.
	writeHAR(t, dir, 0)
	q, err := loadHARPlan(t, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash() == p.Hash() {
		t.Fatal("missing_bodies: fill does not change the hash")
	}
	back, err := Parse("x", p.render())
	if err != nil || back.Hash() != p.Hash() {
		t.Fatalf("rendering loses missing_bodies: %v", err)
	}
}

func TestHARSiteErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ site, extra, want string }{
		{"./nothere.har", "", "HAR file"},
		{"./bad.har", "", "not a HAR"},
		{"page.har", "missing_bodies: maybe", "missing_bodies"},
		{"har-2x2", "", "unknown generated site"},
	} {
		os.WriteFile(filepath.Join(dir, "bad.har"), []byte("{"), 0o644)
		writeHAR(t, dir, 0)
		text := strings.Replace(strings.Replace(harPlan, "%s", c.extra, 1), "[page.har, har-6x70]", c.site, 1)
		f := filepath.Join(dir, "p.yaml")
		os.WriteFile(f, []byte(text), 0o644)
		_, err := Load(f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("site %s %s: %v, want %q", c.site, c.extra, err, c.want)
		}
	}
}

func TestHARSiteEstimate(t *testing.T) {
	n, b := siteShape("har-15x120")
	if n != 120 || b < 2_000_000 {
		t.Fatalf("har-15x120: %d requests, %d bytes", n, b)
	}
}
