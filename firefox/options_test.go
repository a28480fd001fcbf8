package firefox

import (
	"errors"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

func TestOptionErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		o     Options
		field string
	}{
		{Options{Protocol: "quic", ProfileDir: dir}, "Protocol"},
		{Options{Protocol: model.ProtoH2, URL: "http://10.0.0.2/", ProfileDir: dir}, "URL"},
		{Options{Protocol: model.ProtoH1C, URL: "https://10.0.0.2/", ProfileDir: dir}, "URL"},
		{Options{Protocol: model.ProtoH3, ProfileDir: dir}, "H3Origin"},
		{Options{Protocol: model.ProtoH2, H3Origin: "10.0.0.2:443", ProfileDir: dir}, "H3Origin"},
		{Options{Protocol: model.ProtoH3, H3Origin: "10.0.0.2:0", ProfileDir: dir}, "H3Origin"},
		{Options{Protocol: model.ProtoH2, CAPEM: []byte("not pem"), ProfileDir: dir}, "CAPEM"},
		{Options{Protocol: model.ProtoH2, CAPEM: []byte("x"), AcceptInsecureCerts: true, ProfileDir: dir}, "CAPEM"},
		{Options{Protocol: model.ProtoH2, Prefs: map[string]any{"a.b": 1.5}, ProfileDir: dir}, "Prefs"},
		{Options{Protocol: model.ProtoH2, Timeout: -1, ProfileDir: dir}, "Timeout"},
		{Options{Protocol: model.ProtoH2, ProfileDir: dir + "/missing"}, "ProfileDir"},
		{Options{Protocol: model.ProtoH2, ProfileDir: dir, Exe: "/nonexistent/firefox"}, "Exe"},
	} {
		_, _, err := c.o.validate(false)
		var oe *OptionError
		if !errors.As(err, &oe) || oe.Field != c.field {
			t.Errorf("%+v: error %v; want an OptionError on %s", c.o, err, c.field)
		}
	}
	_, _, err := Options{Protocol: model.ProtoH2, ProfileDir: dir, Exe: "/nonexistent/firefox"}.validate(false)
	if !errors.Is(err, ErrNoFirefox) {
		t.Errorf("missing Exe: %v does not wrap ErrNoFirefox", err)
	}
}

// TestPrefs: each protocol's preferences, the fixed ones, and Prefs last.
func TestPrefs(t *testing.T) {
	h3 := Options{Protocol: model.ProtoH3, URL: "https://10.0.0.2:4433/page", DisableCache: true}.prefs()
	if h3["network.http.http3.alt-svc-mapping-for-testing"] != "10.0.0.2;h3=:4433" ||
		h3["network.http.http3.disable_when_third_party_roots_found"] != false || h3["network.http.http3.enable"] != true ||
		h3["privacy.reduceTimerPrecision"] != false || h3["browser.cache.memory.enable"] != false {
		t.Errorf("h3 prefs: %v", h3)
	}
	mapped := Options{Protocol: model.ProtoH3, URL: "https://10.0.0.2/", H3Origin: "10.0.0.2:8443"}.prefs()
	if mapped["network.http.http3.alt-svc-mapping-for-testing"] != "10.0.0.2;h3=:8443" {
		t.Errorf("H3Origin mapping: %v", mapped["network.http.http3.alt-svc-mapping-for-testing"])
	}
	h2 := Options{Protocol: model.ProtoH2, Prefs: map[string]any{"privacy.reduceTimerPrecision": true}}.prefs()
	if h2["network.http.http3.enable"] != false || h2["network.http.http2.enabled"] != nil || h2["privacy.reduceTimerPrecision"] != true {
		t.Errorf("h2 prefs: %v", h2)
	}
	h1 := Options{Protocol: model.ProtoH1}.prefs()
	if h1["network.http.http3.enable"] != false || h1["network.http.http2.enabled"] != false || h1["browser.cache.memory.enable"] != nil {
		t.Errorf("h1 prefs: %v", h1)
	}
	js, err := userJS(map[string]any{"b": "x\"y", "a": 1, "c": true})
	if err != nil || js != "user_pref(\"a\", 1);\nuser_pref(\"b\", \"x\\\"y\");\nuser_pref(\"c\", true);\n" {
		t.Errorf("user.js %q, %v", js, err)
	}
	if strings.Contains(js, "\n\n") {
		t.Error("blank line in user.js")
	}
}
