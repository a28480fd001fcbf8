package firefox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	driver "github.com/quicbench/quicbench/firefox"
)

func TestParsePrefs(t *testing.T) {
	p, err := parsePrefs([]byte(`{"*": null, "a": 3, "b": "x", "c": false}`))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := p["*"]; !ok || v != nil || p["a"] != 3 || p["b"] != "x" || p["c"] != false {
		t.Errorf("%#v", p)
	}
	for _, bad := range []string{`[1]`, `{"a": 1.5}`, `{"a": [1]}`, `{"a": {"b": 1}}`, `nope`} {
		if _, err := parsePrefs([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// TestReadInvestigation: the variables turn into Firefox preferences, a
// TMPDIR for neqo's qlog and an orderly quit;
// a bad preferences file is an error every sample reports.
func TestReadInvestigation(t *testing.T) {
	dir := t.TempDir()
	prefs := filepath.Join(dir, "prefs.json")
	if err := os.WriteFile(prefs, []byte(`{"network.http.http3.cc_algorithm": 0}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{firefoxPrefsEnv: prefs, firefoxQlogEnv: filepath.Join(dir, "fq"), firefoxStartEnv: "75s"}
	set := map[string]string{}
	inv := readInvestigation(func(k string) string { return env[k] }, func(k, v string) error { set[k] = v; return nil })
	if inv.err != nil {
		t.Fatal(inv.err)
	}
	if set["TMPDIR"] != filepath.Join(dir, "fq") {
		t.Errorf("TMPDIR set to %q", set["TMPDIR"])
	}
	if fi, err := os.Stat(filepath.Join(dir, "fq")); err != nil || !fi.IsDir() {
		t.Errorf("qlog directory not made: %v", err)
	}
	o := driver.Options{Prefs: map[string]any{"x": 1}}
	if err := inv.applyFirefox(&o); err != nil {
		t.Fatal(err)
	}
	if o.Prefs["x"] != 1 || o.Prefs["network.http.http3.cc_algorithm"] != 0 || o.Prefs["network.http.http3.enable_qlog"] != true || o.StartTimeout != 75*time.Second {
		t.Errorf("Firefox prefs %v", o.Prefs)
	}
	if !inv.keep(nil).quit {
		t.Error("with qlog, Firefox sessions must quit in order")
	}

	none := readInvestigation(func(string) string { return "" }, func(string, string) error { t.Error("setenv without qlog"); return nil })
	o = driver.Options{}
	if err := none.applyFirefox(&o); err != nil || o.Prefs != nil {
		t.Errorf("no variables: prefs %v, err %v", o.Prefs, err)
	}
	if none.keep(nil).quit {
		t.Error("without qlog, Firefox sessions are killed as usual")
	}

	if inv := readInvestigation(func(k string) string {
		if k == firefoxStartEnv {
			return "soon"
		}
		return ""
	}, os.Setenv); inv.applyFirefox(&driver.Options{}) == nil {
		t.Error("a bad start timeout is no error")
	}

	bad := readInvestigation(func(k string) string {
		if k == firefoxPrefsEnv {
			return filepath.Join(dir, "missing.json")
		}
		return ""
	}, os.Setenv)
	if err := bad.applyFirefox(&driver.Options{}); err == nil || !strings.Contains(err.Error(), firefoxPrefsEnv) {
		t.Errorf("missing prefs file: %v", err)
	}
}
