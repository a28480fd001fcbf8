package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/internal/testsupport"
)

// requireChromiumCLI skips the test when no Chromium binary is installed
// where the browser package looks first.
func requireChromiumCLI(t testing.TB) {
	t.Helper()
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if _, err := os.Stat(p); err == nil {
			return
		}
	}
	testsupport.Unavailable(t, "chromium is not installed: skipping the real-browser test")
}

// chromiumJSON is one page of fetch --client chromium --json.
type chromiumJSON struct {
	browser.Result
	Error string `json:"error"`
}

func TestFetchChromiumCLI(t *testing.T) {
	requireChromiumCLI(t)
	info, _ := serveControlled(t)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(info.CAPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "https://127.0.0.1:" + strconv.Itoa(info.Port)
	const objects = 4

	// h2 reads the certificate over TLS/TCP (verified with --ca); h3 over
	// QUIC (not verified).
	for proto, want := range map[string][]string{
		"h2": {"--ca", caFile},
		"h3": {"--insecure"},
	} {
		args := append([]string{"fetch", "--client", "chromium", "--proto", proto, "--json"}, want...)
		code, out, errs := runEndpointCLI(t, nil, append(args, base+"/page/4/2KB")...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s\n%s", proto, code, out, errs)
		}
		var res chromiumJSON
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: --json output: %v\n%s", proto, err, out)
		}
		if res.Error != "" || res.Protocol != proto || res.Status != 200 || res.Negotiated.ALPN != proto || res.Load <= 0 {
			t.Errorf("%s: result %+v", proto, res)
		}
		if len(res.Resources) != 1+objects {
			t.Errorf("%s: %d resources, want %d: %+v", proto, len(res.Resources), 1+objects, res.Resources)
		}
		for _, r := range res.Resources {
			if r.Protocol != proto {
				t.Errorf("%s: resource %s used %q", proto, r.Name, r.Protocol)
			}
		}
	}
}

func TestFetchChromiumCLIMismatchFails(t *testing.T) {
	requireChromiumCLI(t)
	info, _ := serveControlled(t, "--protocols", "h1,h1c")
	// The server speaks only HTTP/1.1: every resource is a mismatch. --spki
	// skips reading the certificate.
	code, out, errs := runEndpointCLI(t, nil, "fetch", "--client", "chromium", "--proto", "h2", "--spki", info.SPKI,
		"--addr", "127.0.0.1:"+strconv.Itoa(info.Port), "/page/1/1KB")
	if code != ExitFailure || !strings.Contains(errs, "did not use h2") || !strings.Contains(errs, "/page/1/1KB/0.png used http/1.1") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(out, "http/1.1 (want h2)") || !strings.Contains(out, "DOMContentLoaded") {
		t.Errorf("summary:\n%s", out)
	}
}

func TestFetchChromiumCLIUsageErrors(t *testing.T) {
	const u = "https://127.0.0.1:1/page/1/1KB"
	cases := map[string][]string{
		"not raw quic streams":             {"fetch", "--client", "chromium", "--proto", "quic", "--insecure", u},
		"not raw tcp streams":              {"fetch", "--client", "chromium", "--proto", "tcp", "--insecure", u},
		"--upload does not apply":          {"fetch", "--client", "chromium", "--upload", "1MB", "--insecure", u},
		"--0rtt does not apply":            {"fetch", "--client", "chromium", "--proto", "h3", "--0rtt", "--insecure", u},
		"--parallel does not":              {"fetch", "--client", "chromium", "--parallel", "4", "--insecure", u},
		"--warm does not apply":            {"fetch", "--client", "chromium", "--warm", "--insecure", u},
		"unknown client":                   {"fetch", "--client", "netscape", u},
		"only applies to a browser client": {"fetch", "--spki", "M2QEPkFMcriEn0Rfhgob6UMArUmXYkH4i9WxddB/cAM=", u},
		"not a base64 SHA-256":             {"fetch", "--client", "chromium", "--spki", "abc", u},
		"--spki excludes":                  {"fetch", "--client", "chromium", "--spki", "M2QEPkFMcriEn0Rfhgob6UMArUmXYkH4i9WxddB/cAM=", "--insecure", u},
		"exclude each other":               {"fetch", "--client", "chromium", "--ca", "x.pem", "--insecure", u},
		"needs --addr":                     {"fetch", "--client", "chromium", "/page/1/1KB"},
	}
	for want, args := range cases {
		code, _, errs := runEndpointCLI(t, strings.NewReader(""), args...)
		if code != ExitUsage || !strings.Contains(errs, want) {
			t.Errorf("%v: exit %d, stderr %q; want usage error containing %q", args, code, errs, want)
		}
	}
}
