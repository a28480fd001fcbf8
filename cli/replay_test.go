package cli

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/internal/testsupport"
)

// entryKey identifies an entry for the round trip: method, URL, status
// and the hash of the body.
func entryKeys(t *testing.T, h *har.HAR) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, e := range h.Log.Entries {
		b, ok := e.Response.Content.Body()
		sum := "no body"
		if ok {
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		out[e.Request.Method+" "+e.Request.URL] = fmt.Sprintf("%d %s", e.Response.Status, sum)
	}
	return out
}

// TestRecordRoundTrip records, with quicbench record in headless
// Chromium, a page that quicbench replay serves inside a testbed (the
// recorder runs in the client namespace with the recorded names mapped),
// and replays the recording: the recording holds the same URLs, statuses
// and body hashes as the page, and replays with no unmatched request.
func TestRecordRoundTrip(t *testing.T) {
	testsupport.RequireRoot(t, "needs root (network namespaces)")
	requireChromiumCLI(t)
	if testing.Short() {
		t.Skip("integration test (slow); skipped with -short")
	}
	dir := t.TempDir()
	src, err := sites.BuildPage(sites.PageShape{Name: "rt", Origins: 4, Requests: 24, Bytes: 300_000, SharedIPs: 1, Seed: 21})
	if err != nil {
		t.Fatal(err)
	}
	gen := filepath.Join(dir, "gen.har")
	if err := har.WriteFile(gen, src); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(dir, "rec.har")
	t.Setenv(cliExecEnv, "main") // the children are this test binary acting as quicbench
	exe := os.Args[0]
	code, out, errs := runCLIExe(t, exe, "replay", gen, "--link", "delay 2ms", "--",
		"sh", "-c", fmt.Sprintf("%q record https://www.news.example/ -o %q --spki \"$QUICBENCH_REPLAY_SPKI\"", exe, rec))
	if code != 0 {
		t.Fatalf("replay -- record: exit %d\n%s\n%s", code, out, errs)
	}
	got, err := har.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	want, have := entryKeys(t, src), entryKeys(t, got)
	for k, v := range want {
		if have[k] != v {
			t.Errorf("%s: recorded %q, want %q", k, have[k], v)
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			t.Errorf("recorded %s, which the page does not have", k)
		}
	}
	if got.Log.Browser == nil || !strings.Contains(got.Log.Browser.Name, "Chromium") {
		t.Errorf("browser %+v", got.Log.Browser)
	}
	// The recording replays, every request answered.
	code, out, errs = runCLIExe(t, exe, "replay", rec, "--client", "builtin", "--proto", "h2,h3")
	if code != 0 || !strings.Contains(out, "24 entries from 4 origins") {
		t.Fatalf("replay of the recording: exit %d\n%s\n%s", code, out, errs)
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 6 && (f[0] == "h2" || f[0] == "h3") && (f[2] != "ok" || f[5] != "24" || f[6] != "0") {
			t.Errorf("load %q: want ok, 24 requests, 0 unmatched", line)
		}
	}
}

func TestReplayCLIErrors(t *testing.T) {
	dir := t.TempDir()
	src, err := sites.BuildPage(sites.PageShape{Name: "m", Origins: 2, Requests: 6, Bytes: 50_000, Missing: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "m.har")
	if err := har.WriteFile(f, src); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", filepath.Join(dir, "none.har")}, "no such file"},
		{[]string{"replay", f}, "missing_bodies: fill"},
		{[]string{"replay", f, "--proto", "quic"}, "--proto"},
		{[]string{"replay", f, "--client", "lighthouse"}, "--client"},
		{[]string{"replay", "har-6x70", "--link", "delay 5 ms"}, "--link"},
		{[]string{"record", "ftp://x/", "-o", "x.har"}, "not an http(s) URL"},
		{[]string{"record", "https://example.com/"}, "no output file"},
		{[]string{"record", "https://example.com/", "-o", filepath.Join(dir, "x.har"), "--client", "builtin"}, "does not record pages"},
		{[]string{"fetch", "--client", "firefox", "--proto", "h2", "--har", filepath.Join(dir, "y.har"), "--har-bodies", "https://127.0.0.1:9/"}, "--har-bodies does not apply to --client firefox"},
		{[]string{"fetch", "--proto", "h2", "--har", filepath.Join(dir, "y.har"), "https://127.0.0.1:9/"}, "--har"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != ExitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want usage error with %q", c.args, code, errs, c.want)
		}
	}
}
