package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// outputCommands are the commands that write a file or directory, each of
// which spells its output flag -o/--output.
var outputCommands = map[string]func(*Env) *cobra.Command{
	"run":     newRunCmd,
	"report":  newReportCommand,
	"compare": newCompareCommand,
	"export":  newExportCommand,
	"merge":   newMergeCmd,
}

// Every spelling of the output flag, new and old, sets the same value.
func TestOutputFlagSpellings(t *testing.T) {
	env := &Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	spellings := append([]string{"-o", "--output"}, prefixed("--", outputAliases)...)
	for name, newCmd := range outputCommands {
		for _, flag := range spellings {
			cmd := newCmd(env)
			if err := cmd.ParseFlags([]string{flag, "x.out"}); err != nil {
				t.Errorf("%s %s: %v", name, flag, err)
				continue
			}
			got, err := cmd.Flags().GetString("output")
			if err != nil || got != "x.out" {
				t.Errorf("%s %s x.out: --output is %q (%v)", name, flag, got, err)
			}
		}
	}
}

// The help shows -o/--output and none of the old spellings.
func TestOutputFlagHelp(t *testing.T) {
	for name := range outputCommands {
		code, out, errs := runCLI(t, name, "--help")
		if code != ExitOK {
			t.Fatalf("%s --help: exit %d: %s", name, code, errs)
		}
		if !strings.Contains(out, "-o, --output") {
			t.Errorf("%s --help does not show -o, --output:\n%s", name, out)
		}
		for _, old := range outputAliases {
			if strings.Contains(out, "--"+old+" ") {
				t.Errorf("%s --help shows the old spelling --%s:\n%s", name, old, out)
			}
		}
	}
}

// The old spelling works end to end: report writes where --out says, and
// so does export.
func TestOutputFlagOldSpellingEndToEnd(t *testing.T) {
	path := reportDB(t)
	html := filepath.Join(t.TempDir(), "old.html")
	if code, _, errs := reportCLI(t, "", "report", path, "--out", html); code != ExitOK {
		t.Fatalf("report --out: exit %d: %s", code, errs)
	}
	if st, err := os.Stat(html); err != nil || st.Size() == 0 {
		t.Fatalf("report --out %s wrote nothing: %v", html, err)
	}

	epath, _ := exportDB(t)
	dir := t.TempDir()
	code, out, errs := runCLI(t, "export", epath, "--table", "runs", "--out", dir)
	if code != ExitOK || strings.TrimSpace(out) != filepath.Join(dir, "runs.csv") {
		t.Fatalf("export --out: exit %d, printed %q: %s", code, out, errs)
	}
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}
