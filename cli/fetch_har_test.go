package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/har"
)

// TestFetchChromiumHAR loads two pages with fetch --client chromium --har
// and checks the file: two pages, each resource once, with the protocol
// the load checked and the pages' entries under their own page.
func TestFetchChromiumHAR(t *testing.T) {
	requireChromiumCLI(t)
	info, _ := serveControlled(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, []byte(info.CAPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "loads.har")
	base := "https://127.0.0.1:" + strconv.Itoa(info.Port)
	code, stdout, errs := runEndpointCLI(t, nil, "fetch", "--client", "chromium", "--proto", "h2", "--ca", caFile,
		"--har", out, "--har-bodies", base+"/page/3/2KB", base+"/page/2/1KB")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errs)
	}
	h, err := har.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Log.Pages) != 2 || len(h.Log.Entries) != 4+3 {
		t.Fatalf("%d pages, %d entries; want 2 and 7", len(h.Log.Pages), len(h.Log.Entries))
	}
	perPage := map[string]int{}
	for _, e := range h.Log.Entries {
		perPage[e.Pageref]++
		if e.Response.HTTPVersion != "h2" || !strings.Contains(e.Comment, "nextHopProtocol h2") {
			t.Errorf("%s: %q %q", e.Request.URL, e.Response.HTTPVersion, e.Comment)
		}
		if _, ok := e.Response.Content.Body(); !ok {
			t.Errorf("%s: no body with --har-bodies", e.Request.URL)
		}
	}
	if perPage["page_1"] != 4 || perPage["page_2"] != 3 {
		t.Errorf("entries per page %v", perPage)
	}
	if !strings.Contains(errs, "HAR of 2 page loads") {
		t.Errorf("stderr %q", errs)
	}
}
