package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	stacksTableStart = "<!-- quicbench stacks --markdown: generated from the registry; a test checks it -->\n"
	stacksTableEnd   = "<!-- end of the generated table -->\n"
)

// TestStacksTableInDocs: docs/peers.md's table of stacks is the registry's
// (quicbench stacks --markdown). Run with QUICBENCH_UPDATE_DOCS=1 to write
// it.
func TestStacksTableInDocs(t *testing.T) {
	path := filepath.Join("..", "docs", "peers.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i, j := strings.Index(doc, stacksTableStart), strings.Index(doc, stacksTableEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated table between %q and %q", path, stacksTableStart, stacksTableEnd)
	}
	want := StacksMarkdown()
	got := doc[i+len(stacksTableStart) : j]
	if got == want {
		return
	}
	if os.Getenv("QUICBENCH_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc[:i+len(stacksTableStart)]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's table of stacks differs from the registry; run QUICBENCH_UPDATE_DOCS=1 go test ./cli -run TestStacksTableInDocs\nwant:\n%s", path, want)
}

// TestStacksCommand: the list names every stack; one stack's description
// says what it cannot do; an unknown one is a usage error.
func TestStacksCommand(t *testing.T) {
	code, out, _ := runCLI(t, "stacks")
	if code != 0 || !strings.Contains(out, "ngtcp2") || !strings.Contains(out, "NewReno (fixed)") {
		t.Fatalf("stacks: %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, "stacks", "caddy")
	if code != 0 || !strings.Contains(out, "no upload: Caddy serves static files only") {
		t.Fatalf("stacks caddy: %d\n%s", code, out)
	}
	if code, _, errs := runCLI(t, "stacks", "nosuch"); code != ExitUsage || !strings.Contains(errs, "no stack") {
		t.Fatalf("stacks nosuch: %d %s", code, errs)
	}
}
