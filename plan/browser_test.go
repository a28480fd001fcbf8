package plan

import (
	"strings"
	"testing"
)

// browser_restart: always enters the hash (a fresh browser per sample
// measures something else than a fresh context), auto is the default and
// hashes as the field's absence; browser_memory_limit (a size) and
// browser_files_limit (a count) are outside the hash. Both survive the canonical rendering, and bad values are
// refused with the field's name.
func TestBrowserFields(t *testing.T) {
	const base = "name: h\nclient: chromium\nscenarios:\n  - name: s\ntests:\n  - test: page\n"
	parse := func(extra string) *Plan {
		t.Helper()
		p, err := Parse("p.yaml", []byte(base+extra))
		if err != nil {
			t.Fatalf("%q: %v", extra, err)
		}
		return p
	}
	def, auto, always, limit := parse(""), parse("browser_restart: auto\n"), parse("browser_restart: always\n"), parse("browser_memory_limit: 1500MB\n")
	if def.BrowserRestart() != BrowserRestartAuto || auto.BrowserRestart() != BrowserRestartAuto || always.BrowserRestart() != BrowserRestartAlways {
		t.Errorf("BrowserRestart: %q, %q, %q", def.BrowserRestart(), auto.BrowserRestart(), always.BrowserRestart())
	}
	if def.Hash() != auto.Hash() || def.Hash() == always.Hash() {
		t.Error("browser_restart: auto must hash as the default and always differently")
	}
	if def.BrowserMemoryLimit() != 0 || limit.BrowserMemoryLimit() != 1500e6 || limit.Hash() != def.Hash() {
		t.Errorf("BrowserMemoryLimit: %d, %d (hash changed: %v)", def.BrowserMemoryLimit(), limit.BrowserMemoryLimit(), limit.Hash() != def.Hash())
	}
	files := parse("browser_files_limit: 4096\n")
	if def.BrowserFileLimit() != 0 || files.BrowserFileLimit() != 4096 || files.Hash() != def.Hash() {
		t.Errorf("BrowserFileLimit: %d, %d (hash changed: %v)", def.BrowserFileLimit(), files.BrowserFileLimit(), files.Hash() != def.Hash())
	}
	both := parse("browser_restart: always\nbrowser_memory_limit: 2GB\nbrowser_files_limit: 3000\n")
	both.Description = "changed" // forces the canonical rendering
	back, err := Parse("r.yaml", both.YAML())
	if err != nil {
		t.Fatalf("rendered plan: %v\n%s", err, both.YAML())
	}
	if back.BrowserRestart() != BrowserRestartAlways || back.BrowserMemoryLimit() != 2e9 || back.BrowserFileLimit() != 3000 || back.Hash() != both.Hash() {
		t.Errorf("rendered: restart %q, limits %d, %d\n%s", back.BrowserRestart(), back.BrowserMemoryLimit(), back.BrowserFileLimit(), both.YAML())
	}
	for extra, want := range map[string]string{
		"browser_restart: sometimes\n":  `browser_restart: "sometimes": expected one of auto, always`,
		"browser_restart: [always]\n":   "browser_restart: expected a string",
		"browser_memory_limit: 1MB\n":   `browser_memory_limit: "1MB": out of range (allowed: 64MiB..1TiB)`,
		"browser_memory_limit: lots\n":  "browser_memory_limit",
		"browser_memory_limit: true\n":  "browser_memory_limit",
		"browser_memory_limit: 9000T\n": "browser_memory_limit",
		"browser_files_limit: 10\n":     `browser_files_limit: "10": out of range (allowed: 64..1048576)`,
		"browser_files_limit: 2k\n":     `browser_files_limit: "2k": expected an integer (allowed: 64..1048576), got a string`,
		"browser_files_limit: -5\n":     `browser_files_limit: "-5": out of range`,
	} {
		_, err := Parse("p.yaml", []byte(base+extra))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", extra, err, want)
		}
	}
}
