package firefox

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// quietPrefs turn off Firefox's background work: services that would send
// traffic over the emulated link (the client namespace routes everything
// to the server side) or take CPU during the measured load. Firefox's
// remote agent sets more of its own "recommended" preferences when it
// starts.
var quietPrefs = map[string]any{
	"app.normandy.enabled":                                       false,
	"app.shield.optoutstudies.enabled":                           false,
	"app.update.auto":                                            false,
	"app.update.disabledForTesting":                              true,
	"browser.aboutwelcome.enabled":                               false,
	"browser.newtabpage.enabled":                                 false,
	"browser.ping-centre.telemetry":                              false,
	"browser.region.network.url":                                 "",
	"browser.region.update.enabled":                              false,
	"browser.safebrowsing.blockedURIs.enabled":                   false,
	"browser.safebrowsing.downloads.enabled":                     false,
	"browser.safebrowsing.malware.enabled":                       false,
	"browser.safebrowsing.phishing.enabled":                      false,
	"browser.search.update":                                      false,
	"browser.sessionstore.resume_from_crash":                     false,
	"browser.shell.checkDefaultBrowser":                          false,
	"browser.startup.homepage_override.mstone":                   "ignore",
	"browser.startup.page":                                       0,
	"browser.topsites.contile.enabled":                           false,
	"datareporting.healthreport.uploadEnabled":                   false,
	"datareporting.policy.dataSubmissionEnabled":                 false,
	"dom.push.connection.enabled":                                false,
	"extensions.blocklist.enabled":                               false,
	"extensions.getAddons.cache.enabled":                         false,
	"extensions.update.enabled":                                  false,
	"identity.fxaccounts.enabled":                                false,
	"media.gmp-manager.updateEnabled":                            false,
	"messaging-system.rsexperimentloader.enabled":                false,
	"network.captive-portal-service.enabled":                     false,
	"network.connectivity-service.enabled":                       false,
	"network.dns.disablePrefetch":                                true,
	"network.predictor.enabled":                                  false,
	"network.prefetch-next":                                      false,
	"network.trr.mode":                                           5, // no DNS over HTTPS
	"security.OCSP.enabled":                                      0,
	"security.remote_settings.crlite_filters.enabled":            false,
	"security.remote_settings.intermediates.enabled":             false,
	"services.settings.server":                                   "data:,",
	"toolkit.telemetry.enabled":                                  false,
	"toolkit.telemetry.server":                                   "data:,",
	"toolkit.startup.max_resumed_crashes":                        -1,
	"network.http.speculative-parallel-limit":                    0, // no speculative connections: the sample counts what the page opens
	"privacy.reduceTimerPrecision":                               false,
	"browser.tabs.warnOnClose":                                   false,
	"browser.warnOnQuit":                                         false,
	"datareporting.healthreport.service.enabled":                 false,
	"browser.newtabpage.activity-stream.feeds.system.topstories": false,
}

// AllPrefs is the name that, with a nil value in Options.Prefs, removes
// every preference quicbench sets but the protocol's (HTTP/2 and HTTP/3
// on or off, and for h3 the origin's mapping and
// disable_when_third_party_roots_found): the profile closest to a fresh
// user's that still trusts the test CA and reaches the origin over HTTP/3.
const AllPrefs = "*"

// prefs returns the preferences of a session, by name: quietPrefs, the
// timer precision, the protocol's, the cache's, then Options.Prefs (a nil
// value removes the preference; AllPrefs with nil removes all but the
// protocol's before the others apply).
//
//   - privacy.reduceTimerPrecision=false: Firefox otherwise rounds every
//     Performance API time to 1 ms; without the rounding they have about
//     20 µs resolution, like Chromium's.
//   - h1/h1c: network.http.http2.enabled and network.http.http3.enable
//     false; h2: network.http.http3.enable false.
//   - h3: network.http.http3.alt-svc-mapping-for-testing maps the origin's
//     host to HTTP/3 on its port, so the first request goes over QUIC (no
//     Alt-Svc discovery), and
//     network.http.http3.disable_when_third_party_roots_found=false:
//     otherwise Firefox silently abandons HTTP/3 for a server whose chain
//     ends in a root that is not built in (the test CA) and loads over TCP.
//   - DisableCache: browser.cache.disk.enable and memory.enable false.
func (o Options) prefs() map[string]any {
	p := maps.Clone(quietPrefs)
	if v, ok := o.Prefs[AllPrefs]; ok && v == nil {
		p = map[string]any{}
	}
	switch o.Protocol {
	case model.ProtoH1, model.ProtoH1C:
		p["network.http.http2.enabled"] = false
		p["network.http.http3.enable"] = false
	case model.ProtoH2:
		p["network.http.http3.enable"] = false
	case model.ProtoH3:
		p["network.http.http3.enable"] = true
		p["network.http.http3.alt-svc-mapping-for-testing"] = o.h3Mapping()
		p["network.http.http3.disable_when_third_party_roots_found"] = false
	}
	if _, bare := o.Prefs[AllPrefs]; o.DisableCache && !bare {
		p["browser.cache.disk.enable"] = false
		p["browser.cache.memory.enable"] = false
	}
	for name, v := range o.Prefs {
		if v == nil {
			delete(p, name)
		} else {
			p[name] = v
		}
	}
	return p
}

// userJS renders preferences as the lines of a profile's user.js, sorted by
// name.
func userJS(prefs map[string]any) (string, error) {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(prefs)) {
		n, err := json.Marshal(name)
		if err != nil {
			return "", err
		}
		v, err := json.Marshal(prefs[name])
		if err != nil {
			return "", fmt.Errorf("preference %s: %w", name, err)
		}
		fmt.Fprintf(&b, "user_pref(%s, %s);\n", n, v)
	}
	return b.String(), nil
}
