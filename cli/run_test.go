package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
)

// Bad plans fail fast, name the problem and create no database.
func TestRunRejectsBadPlans(t *testing.T) {
	if os.Geteuid() != 0 {
		testsupport.Unavailable(t, "quicbench run checks for root first")
	}
	dir := t.TempDir()
	cases := map[string]struct{ yaml, want string }{
		"unknown-test":  {"scenarios: [{name: a}]\ntests: [{test: teleport}]\n", "teleport"},
		"negative-size": {"scenarios: [{name: a}]\ntests: [{test: download, params: {size: -5MB}}]\n", "size"},
		"bad-link":      {"scenarios: [{name: a, link: \"delay -5ms\"}]\ntests: [{test: ttfb}]\n", "-5ms"},
		"empty-grid":    {"scenarios: [{name: g, grid: {rate: []}}]\ntests: [{test: ttfb}]\n", "rate"},
		"loss-150":      {"scenarios: [{name: a, link: \"loss 150%\"}]\ntests: [{test: ttfb}]\n", "150%"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			planFile := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(planFile, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			db := filepath.Join(dir, name+".db")
			code, _, stderr := runCLI(t, "run", "--plan", planFile, "-o", db)
			if code != ExitUsage {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitUsage, stderr)
			}
			if !strings.Contains(stderr, c.want) || !strings.Contains(stderr, name+".yaml:") {
				t.Errorf("message does not name the file:line and %q:\n%s", c.want, stderr)
			}
			if _, err := os.Stat(db); !os.IsNotExist(err) {
				t.Errorf("a database was created for a bad plan")
			}
		})
	}
	code, _, stderr := runCLI(t, "run", "--plan", "no-such-plan")
	if code != ExitUsage || !strings.Contains(stderr, "quick") {
		t.Fatalf("unknown plan: exit %d, stderr %s", code, stderr)
	}
}
