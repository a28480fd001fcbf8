package firefox

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// TestPrefsRemove: a nil value removes one of quicbench's preferences, and
// AllPrefs removes all of them but the protocol's.
func TestPrefsRemove(t *testing.T) {
	o := Options{Protocol: model.ProtoH3, URL: "https://10.0.0.2:4433/page", DisableCache: true,
		Prefs: map[string]any{"privacy.reduceTimerPrecision": nil, "network.http.http3.enable_qlog": true}}
	p := o.prefs()
	if _, ok := p["privacy.reduceTimerPrecision"]; ok {
		t.Error("privacy.reduceTimerPrecision still set")
	}
	if p["network.http.http3.enable_qlog"] != true || p["network.http.speculative-parallel-limit"] != 0 || p["browser.cache.disk.enable"] != false {
		t.Errorf("other preferences lost: %v", p)
	}

	o.Prefs = map[string]any{AllPrefs: nil, "network.http.http3.enable_qlog": true}
	bare := o.prefs()
	want := []string{
		"network.http.http3.alt-svc-mapping-for-testing",
		"network.http.http3.disable_when_third_party_roots_found",
		"network.http.http3.enable",
		"network.http.http3.enable_qlog",
	}
	if got := slices.Sorted(maps.Keys(bare)); !slices.Equal(got, want) {
		t.Errorf("bare h3 profile: %v, want %v", got, want)
	}
	h2 := Options{Protocol: model.ProtoH2, DisableCache: true, Prefs: map[string]any{AllPrefs: nil}}.prefs()
	if len(h2) != 1 || h2["network.http.http3.enable"] != false {
		t.Errorf("bare h2 profile: %v", h2)
	}
}

func TestPrefsValidate(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		prefs map[string]any
		ok    bool
	}{
		{map[string]any{AllPrefs: nil, "a.b": nil, "c": "x", "d": 1, "e": true}, true},
		{map[string]any{AllPrefs: true}, false},
		{map[string]any{"a": 1.5}, false},
	} {
		_, _, err := Options{Protocol: model.ProtoH2, ProfileDir: dir, Prefs: c.prefs, Exe: "/bin/true"}.validate(false)
		var oe *OptionError
		if bad := errors.As(err, &oe) && oe.Field == "Prefs"; bad == c.ok {
			t.Errorf("%v: error %v", c.prefs, err)
		}
	}
}
