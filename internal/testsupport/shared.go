package testsupport

import (
	"os"
	"path/filepath"
	"testing"
)

// RequireEnv names the environment variable that turns the skips of
// integration tests into failures. CI sets it (.ci/run): on CI's machine
// every prerequisite (root, Chromium, Lighthouse, the shared traces) is
// installed, so a test that would skip there has lost its prerequisite and
// must say so instead of passing silently.
const RequireEnv = "QUICBENCH_REQUIRE_ALL"

// Unavailable ends a test whose prerequisite is missing: it skips with the
// reason, or fails with it when RequireEnv is set to a non-empty value.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("prerequisite missing while "+RequireEnv+" is set: "+format, args...)
	}
	t.Skipf(format, args...)
}

// RequireRoot ends the test through Unavailable, saying reason ("needs
// root (network namespaces)"), unless the process runs as root.
func RequireRoot(t testing.TB, reason string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "%s", reason)
	}
}

// RepoRoot returns the directory of the module's go.mod, found by walking up
// from the test's working directory (its package directory).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatalf("working directory: %v", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// SharedDir returns the project's shared material (research notes, public
// link traces): the folder shared/ beside the repository's checkout,
// wherever the checkout lives. If it is absent, the test ends through
// Unavailable.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "..", "shared")
	if _, err := os.Stat(dir); err != nil {
		Unavailable(t, "no shared/ folder beside the checkout: %v", err)
	}
	return dir
}

// TracePath returns the path of one of the shared cellular traces
// (shared/traces/NAME), ending the test through Unavailable when the file
// is absent.
func TracePath(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(SharedDir(t), "traces", name)
	if _, err := os.Stat(p); err != nil {
		Unavailable(t, "trace %s: %v", name, err)
	}
	return p
}
