// Package firefox drives headless Firefox (Debian's firefox-esr) over
// WebDriver BiDi, the protocol of Firefox's built-in remote agent, to
// measure real page loads over HTTP/1.1, HTTP/2 and HTTP/3. It returns the
// Result of package browser, with the same metrics and the same
// per-resource protocol check (nextHopProtocol) as the Chromium client.
//
// Load runs one cold sample: a fresh profile, one navigation, then the
// browser is killed and the profile removed. A Session keeps one browser
// across several loads for warm connections, or serves many samples, each
// in a fresh UserContext (Session.NewContext: a WebDriver BiDi user
// context, Firefox's container, with its own connections, TLS session and
// QUIC token caches, HTTP cache, Alt-Svc and cookies). Firefox is started
// with --remote-allow-system-access, so that the driver can act in its
// privileged scope: it sets the sample's protocol preferences in the
// running browser (they are live: one Firefox serves h1, h2 and h3
// samples) and, when a user context is removed, closes the idle
// connections Firefox would otherwise keep in its pool and forgets the
// origins for which it gave HTTP/3 up (a list Firefox keeps for the
// whole browser). browser.Pool keeps Sessions across samples.
//
// # Driver
//
// The driver speaks BiDi itself over a WebSocket (github.com/coder/websocket)
// with these commands: session.new, session.status, browsingContext.getTree
// (also of the chrome windows, "moz:scope"), script.addPreloadScript,
// browsingContext.setViewport, network.setCacheBehavior,
// browsingContext.navigate (wait "complete"), script.evaluate (the
// Performance API script of package browser, and the privileged scripts),
// browser.createUserContext, browsingContext.create and
// browser.removeUserContext. It runs
// in the calling Go process, as chromedp does for Chromium, rather than in
// a Node.js driver (puppeteer-core): no Node start per sample on the
// measured machine, the driver's CPU is not charged to the sample's client
// CPU (which counts the browser's processes only, as for Chromium), and
// Firefox is started by this package in its own process group, which
// Close kills whole (puppeteer starts Firefox detached, in a group of its
// own, out of reach of its caller's group kill).
//
// # Profile and protocol control
//
// Each browser gets a fresh profile: the test CA (Options.CAPEM) imported
// into its NSS database with certutil (libnss3-tools), or
// Options.AcceptInsecureCerts, and a user.js with the session's
// preferences (see Options.prefs): background services off, HTTP caches off
// (with DisableCache), privacy.reduceTimerPrecision=false (timings of
// about 20 µs resolution instead of 1 ms), and per protocol:
//
//   - h1 / h1c: network.http.http2.enabled and network.http.http3.enable
//     false;
//   - h2: network.http.http3.enable false;
//   - h3: network.http.http3.alt-svc-mapping-for-testing "HOST;h3=:PORT"
//     (the origin is reached over HTTP/3 from its first request, without
//     Alt-Svc discovery) and
//     network.http.http3.disable_when_third_party_roots_found false.
//     Without the latter Firefox silently falls back to TCP for a server
//     whose chain ends in a root that is not built in (the test CA). Even
//     so the per-resource check is what guarantees the protocol: a
//     resource fetched over anything else fails the sample with a
//     *browser.ProtocolMismatchError.
//
// # Processes
//
// Firefox runs in its own process group (inside a network namespace
// through nsenter with Options.NetNS). Every exit path closes the BiDi
// connection, kills the process group, waits until no process of it
// remains, and removes the profile directory.
package firefox
