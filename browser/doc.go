// Package browser drives headless Chromium over the DevTools protocol
// (chromedp, pipe transport) to measure real page loads over HTTP/1.1,
// HTTP/2 and HTTP/3, and checks that every resource used the protocol asked
// for.
//
// Load runs one cold sample: a fresh profile, one navigation, then the
// browser is closed. A Session keeps one browser across several loads for
// tests that want warm connections (or Alt-Svc discovery: first load over
// TCP, later ones over QUIC).
//
// # Persistent browsers
//
// A Session can also serve many samples, each in a fresh Context
// (Session.NewContext): a Chromium browser context made over DevTools
// (Target.createBrowserContext with disposeOnDetach), with its own
// network context (connections, TLS session cache, QUIC sessions,
// Alt-Svc and other server properties), in-memory HTTP cache, cookies and
// storage, all disposed of when the Context closes. The protocol switches
// below are process-wide: a context of a browser started with QUIC forced
// for an origin loads that origin over h3 whatever it asks for, so a
// browser serves one protocol (Options.LaunchKey says which Options can
// share one). Pool keeps running browsers across samples, one per
// LaunchKey: it restarts a browser that died, does not answer a ping, or
// whose processes hold more memory than a limit (proportional set size,
// GroupUsage), and reports per sample the CPU the browser's processes
// spent (read from /proc, as the browser is no longer reaped per sample)
// and their memory and open files. Pool is generic: package firefox's
// Session plugs into it too.
//
// # Protocol control
//
//   - h1 / h1c: --disable-http2 and --disable-quic. Chromium uses its usual
//     pool of up to 6 HTTP/1.1 connections per origin, even when the server
//     also offers h2 in ALPN.
//   - h2: --disable-quic, so an Alt-Svc header announcing h3 is ignored.
//   - h3: --origin-to-force-quic-on=HOST:PORT (the URL's origin unless
//     Options.ForceQUICOrigin says otherwise). Chromium then never falls
//     back to TCP: a QUIC failure fails the load (a *NavigationError).
//   - h3 with Options.AltSvcDiscovery: QUIC is learnt from Alt-Svc.
//
// Every load is validated per resource (document included) against the
// nextHopProtocol of the Performance API; any other protocol yields a
// *ProtocolMismatchError together with the full Result.
//
// # What the server must provide
//
// One origin (IP literal or a name the client namespace resolves, e.g.
// with --host-resolver-rules in Options.ExtraArgs) serving:
//   - TCP+TLS 1.3 with ALPN "h2" and "http/1.1" (both on one port is fine:
//     the client side restricts h1), or cleartext HTTP/1.1 for h1c;
//   - HTTP/3 (ALPN "h3", QUIC v1) on UDP, on the same port number for
//     forced QUIC, and an Alt-Svc header (h3=":PORT") on its TCP responses
//     for discovery; nothing may serve QUIC on port 9 of that host;
//   - a leaf certificate whose SPKIHash is passed in Options.SPKIHash (the
//     certificate needs the host as a SAN; ECDSA P-256 works);
//   - pages that set <link rel="icon" href="data:,"> (otherwise Chromium
//     requests /favicon.ico, an extra resource) and, for warm loads,
//     Cache-Control headers that fit the test (or Options.DisableCache).
//
// # Processes
//
// Chromium runs in its own process group (optionally inside a network
// namespace through nsenter, Options.NetNS). Every exit path sends
// Browser.close over DevTools, then kills the process group, waits until no
// process of the group or of the profile remains, and removes the profile
// directory. Timeouts are reported as *TimeoutError.
package browser
