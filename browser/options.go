package browser

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
)

// Defaults applied by Options when a field is zero.
const (
	DefaultTimeout      = 30 * time.Second // per page load
	DefaultStartTimeout = 20 * time.Second // browser start until the first tab answers
)

// WindowWidth and WindowHeight are the window size of the headless browser
// (Chromium's --window-size; package firefox sets the same viewport).
// Largest Contentful Paint depends on the viewport, so it is fixed for
// every sample.
const (
	WindowWidth  = 1280
	WindowHeight = 800
)

// altSvcDummyPort is the port named in --origin-to-force-quic-on for Alt-Svc
// discovery: naming the host (with a port nobody serves QUIC on) lets
// Chromium accept the testbed certificate for QUIC to that host, while the
// real QUIC port is still learnt from the server's Alt-Svc header.
const altSvcDummyPort = 9

// Options configure a page load or a Session.
type Options struct {
	// URL is the page to load. Load requires it. NewSession uses it only to
	// derive the QUIC origin when Protocol is h3 and ForceQUICOrigin is
	// empty; Session.Load takes its own URL.
	URL string

	// Protocol is what every resource must be fetched with: model.ProtoH1
	// (nextHopProtocol "http/1.1" over TLS), model.ProtoH1C ("http/1.1",
	// cleartext http:// URL), model.ProtoH2 ("h2") or model.ProtoH3 ("h3").
	// For h1 and h1c Chromium runs with --disable-http2 and --disable-quic,
	// for h2 with --disable-quic, so a server offering every protocol on one
	// port is fine. For h3, QUIC is forced for ForceQUICOrigin (Chromium
	// never falls back to TCP then) unless AltSvcDiscovery is set.
	Protocol string

	// SPKIHash is the base64 SHA-256 of the server leaf certificate's
	// SubjectPublicKeyInfo (see SPKIHash), or several joined by commas,
	// passed as --ignore-certificate-errors-spki-list. Needed for any
	// certificate that is not publicly trusted; for QUIC Chromium honours it
	// only for hosts named in --origin-to-force-quic-on.
	SPKIHash string

	// ForceQUICOrigin is the host:port Chromium must use QUIC for when
	// Protocol is h3. Empty means the host and port of URL.
	ForceQUICOrigin string

	// AltSvcDiscovery makes an h3 sample learn QUIC through the server's
	// Alt-Svc header instead of forcing it: the first load of a fresh
	// profile uses TCP for the document (and so returns a
	// *ProtocolMismatchError together with its Result), later loads of the
	// same Session use h3. Port 9 of the URL's host is named in
	// --origin-to-force-quic-on so that the SPKI list applies to QUIC; the
	// server must not serve QUIC on port 9.
	AltSvcDiscovery bool

	// Exe is the Chromium binary. Empty means /usr/lib/chromium/chromium,
	// then /usr/bin/chromium, then chromium or google-chrome on PATH.
	Exe string

	// NetNS, when set, is a network namespace file (e.g.
	// /run/netns/qbclient1) that Chromium is started in through nsenter(1).
	// The driver talks to Chromium over a pipe, so the calling process may
	// stay in another namespace. Empty starts Chromium in the caller's
	// namespace (that of the process: a thread-local setns is not inherited
	// by the goroutine that forks Chromium).
	NetNS string

	// Timeout bounds each page load (navigation until the load event, then
	// reading the measurements). Zero means DefaultTimeout.
	Timeout time.Duration

	// StartTimeout bounds the browser start until its first tab answers.
	// Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// ProfileDir is the parent directory of the fresh --user-data-dir made
	// for each browser (and removed when it closes). Empty means
	// os.TempDir(). It must exist.
	ProfileDir string

	// DisableCache turns Chromium's HTTP cache off (Network.setCacheDisabled),
	// so that repeated loads in a Session fetch every resource again, over
	// warm connections. A fresh profile starts with an empty cache anyway.
	DisableCache bool

	// ExtraArgs are appended to Chromium's command line, each as
	// "--name" or "--name=value" (e.g. "--host-resolver-rules=...").
	// A --disable-features entry adds to the features quicbench disables
	// (as DisableFeatures does) instead of replacing them.
	ExtraArgs []string

	// DisableFeatures are Chromium features to turn off in addition to
	// those quicbench always disables (background services that would
	// share the link or the CPU with the page), e.g. "RenderDocument".
	DisableFeatures []string

	// RemoteDebugging makes Chromium also serve DevTools on a TCP port of
	// 127.0.0.1 (in its network namespace) that it picks itself, so that
	// another tool (Lighthouse) can attach to the browser; see
	// Session.DevToolsPort. The driver itself keeps its pipe.
	RemoteDebugging bool

	// Output receives Chromium's stdout and stderr and chromedp's log
	// lines. Nil discards them.
	Output io.Writer

	// KeyLogFile, when set, is an absolute path Chromium appends its TLS
	// secrets to (SSLKEYLOGFILE format; --ssl-key-log-file), for a packet
	// capture's decryption.
	KeyLogFile string
}

// NextHopProtocol maps a quicbench protocol to the nextHopProtocol
// Chromium reports for it; false for a protocol Chromium does not speak.
func NextHopProtocol(proto string) (string, bool) {
	switch proto {
	case model.ProtoH1, model.ProtoH1C:
		return "http/1.1", true
	case model.ProtoH2:
		return "h2", true
	case model.ProtoH3:
		return "h3", true
	}
	return "", false
}

// HTTPVersion maps an ALPN id to the HTTP version string of
// model.Negotiated ("" for an unknown id).
func HTTPVersion(alpn string) string {
	switch alpn {
	case "http/1.1":
		return "HTTP/1.1"
	case "h2":
		return "HTTP/2.0"
	case "h3":
		return "HTTP/3.0"
	}
	return ""
}

// OptionError is a bad field of Options: Load and NewSession return it
// before they start anything.
type OptionError struct {
	Field string // the Options field, e.g. "Protocol"
	Err   error
}

func (e *OptionError) Error() string { return "browser: option " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause (ErrNoBrowser for an Exe that is not found).
func (e *OptionError) Unwrap() error { return e.Err }

// validate checks the options; needURL is true for Load. It returns a
// normalised copy with the defaults filled in.
func (o Options) validate(needURL bool) (Options, error) {
	bad := func(field, format string, args ...any) (Options, error) {
		return o, &OptionError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	if _, ok := NextHopProtocol(o.Protocol); !ok {
		return bad("Protocol", "%q is not one of h1, h1c, h2, h3", o.Protocol)
	}
	if needURL || o.URL != "" {
		if err := checkURL(o.URL, o.Protocol); err != nil {
			return bad("URL", "%v", err)
		}
	}
	if o.AltSvcDiscovery {
		if o.Protocol != model.ProtoH3 {
			return bad("AltSvcDiscovery", "only applies to protocol h3, not %s", o.Protocol)
		}
		if o.ForceQUICOrigin != "" {
			return bad("AltSvcDiscovery", "cannot be combined with ForceQUICOrigin %q", o.ForceQUICOrigin)
		}
		if o.URL == "" {
			return bad("URL", "AltSvcDiscovery needs the URL to know the host")
		}
	}
	if o.ForceQUICOrigin != "" {
		if o.Protocol != model.ProtoH3 {
			return bad("ForceQUICOrigin", "only applies to protocol h3, not %s", o.Protocol)
		}
		if err := checkHostPort(o.ForceQUICOrigin); err != nil {
			return bad("ForceQUICOrigin", "%v", err)
		}
	}
	if o.Protocol == model.ProtoH3 && o.ForceQUICOrigin == "" && !o.AltSvcDiscovery && o.URL == "" {
		return bad("ForceQUICOrigin", "h3 needs ForceQUICOrigin or URL to know which origin to use QUIC for")
	}
	if o.SPKIHash != "" {
		for i, h := range strings.Split(o.SPKIHash, ",") {
			raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h))
			if err != nil || len(raw) != sha256.Size {
				return bad("SPKIHash", "entry %d %q is not a base64 SHA-256 digest", i+1, h)
			}
		}
	}
	if o.Timeout < 0 {
		return bad("Timeout", "negative duration %v", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.StartTimeout < 0 {
		return bad("StartTimeout", "negative duration %v", o.StartTimeout)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.ProfileDir == "" {
		o.ProfileDir = os.TempDir()
	}
	if fi, err := os.Stat(o.ProfileDir); err != nil || !fi.IsDir() {
		return bad("ProfileDir", "%q is not an existing directory", o.ProfileDir)
	}
	if o.NetNS != "" {
		if _, err := os.Stat(o.NetNS); err != nil {
			return bad("NetNS", "%v", err)
		}
		if _, err := exec.LookPath("nsenter"); err != nil {
			return bad("NetNS", "nsenter(1) is needed to enter a namespace: %v", err)
		}
	}
	if o.KeyLogFile != "" && !filepath.IsAbs(o.KeyLogFile) {
		return bad("KeyLogFile", "%q is not an absolute path", o.KeyLogFile)
	}
	for i, a := range o.ExtraArgs {
		if !strings.HasPrefix(a, "--") || len(a) < 3 {
			return bad("ExtraArgs", "entry %d %q does not start with --name", i+1, a)
		}
	}
	for i, f := range o.DisableFeatures {
		if f == "" || strings.ContainsAny(f, ", =") {
			return bad("DisableFeatures", "entry %d %q is not one feature name", i+1, f)
		}
	}
	exe, err := findExe(o.Exe)
	if err != nil {
		return o, &OptionError{Field: "Exe", Err: err}
	}
	o.Exe = exe
	return o, nil
}

// checkURL checks that u is an absolute URL whose scheme fits proto.
func checkURL(u, proto string) error {
	if u == "" {
		return errors.New("empty")
	}
	p, err := url.Parse(u)
	if err != nil {
		return err
	}
	want := "https"
	if proto == model.ProtoH1C {
		want = "http"
	}
	if p.Scheme != want {
		return fmt.Errorf("%q: protocol %s needs an %s:// URL", u, proto, want)
	}
	if p.Hostname() == "" {
		return fmt.Errorf("%q has no host", u)
	}
	return nil
}

// checkHostPort checks a host:port origin.
func checkHostPort(hp string) error {
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", hp, err)
	}
	if host == "" {
		return fmt.Errorf("%q has no host", hp)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not in 1..65535", hp, port)
	}
	return nil
}

// urlOrigin returns the host:port of an https URL (port 443 when absent),
// and the host alone.
func urlOrigin(u string) (origin, host string) {
	p, err := url.Parse(u)
	if err != nil {
		return "", ""
	}
	port := p.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(p.Hostname(), port), p.Hostname()
}

// findExe returns the Chromium binary to run.
func findExe(exe string) (string, error) {
	if exe != "" {
		p, err := exec.LookPath(exe)
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoBrowser, err)
		}
		return p, nil
	}
	for _, p := range []string{"/usr/lib/chromium/chromium", "/usr/bin/chromium"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
}

// SPKIHash returns the base64 SHA-256 of cert's SubjectPublicKeyInfo, the
// form --ignore-certificate-errors-spki-list (Options.SPKIHash) expects.
func SPKIHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// args returns Chromium's command line switches (without --user-data-dir
// and the DevTools pipe, which the allocator adds) as name/value pairs; a
// value of true is a bare switch.
func (o Options) args() [][2]any {
	a := [][2]any{
		{"headless", "new"},
		{"no-sandbox", os.Geteuid() == 0},
		{"disable-gpu", true},
		{"no-first-run", true},
		{"no-default-browser-check", true},
		{"log-level", "3"},
		{"window-size", fmt.Sprintf("%d,%d", WindowWidth, WindowHeight)},
		{"hide-scrollbars", true},
		{"mute-audio", true},
		// Background traffic and housekeeping that would share the link
		// or the CPU with the measured page.
		{"disable-background-networking", true},
		{"disable-component-update", true},
		{"disable-sync", true},
		{"disable-default-apps", true},
		{"disable-extensions", true},
		{"disable-breakpad", true},
		{"disable-client-side-phishing-detection", true},
		{"disable-domain-reliability", true},
		{"disable-features", strings.Join(o.disabledFeatures(), ",")},
		{"disable-background-timer-throttling", true},
		{"disable-backgrounding-occluded-windows", true},
		{"disable-renderer-backgrounding", true},
		{"disable-hang-monitor", true},
		{"disable-dev-shm-usage", true},
		{"metrics-recording-only", true},
		{"password-store", "basic"},
		{"use-mock-keychain", true},
	}
	if o.SPKIHash != "" {
		a = append(a, [2]any{"ignore-certificate-errors-spki-list", o.SPKIHash})
	}
	if o.KeyLogFile != "" {
		a = append(a, [2]any{"ssl-key-log-file", o.KeyLogFile})
	}
	switch o.Protocol {
	case model.ProtoH1, model.ProtoH1C:
		a = append(a, [2]any{"disable-http2", true}, [2]any{"disable-quic", true})
	case model.ProtoH2:
		a = append(a, [2]any{"disable-quic", true})
	case model.ProtoH3:
		a = append(a, [2]any{"origin-to-force-quic-on", o.quicOrigin()})
	}
	for _, e := range o.ExtraArgs {
		name, value, ok := strings.Cut(strings.TrimPrefix(e, "--"), "=")
		if name == "disable-features" {
			continue // merged into the list above
		}
		if ok {
			a = append(a, [2]any{name, value})
		} else {
			a = append(a, [2]any{name, true})
		}
	}
	return a
}

// portArgs are the switches of Options.RemoteDebugging: DevTools on a port
// of 127.0.0.1 that Chromium picks (and writes to DevToolsActivePort),
// beside the pipe the driver uses.
func (o Options) portArgs() []string {
	if !o.RemoteDebugging {
		return nil
	}
	return []string{"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"}
}

// baseDisabledFeatures are the Chromium features every browser of
// quicbench runs without: background services that would share the link
// or the CPU with the measured page.
var baseDisabledFeatures = []string{"Translate", "OptimizationHints", "MediaRouter", "DialMediaRouteProvider",
	"InterestFeedContentSuggestions", "CertificateTransparencyComponentUpdater"}

// disabledFeatures is the value of --disable-features: the base list, then
// DisableFeatures, then the features of any --disable-features in
// ExtraArgs, each once.
func (o Options) disabledFeatures() []string {
	list := slices.Clone(baseDisabledFeatures)
	add := func(f string) {
		if f = strings.TrimSpace(f); f != "" && !slices.Contains(list, f) {
			list = append(list, f)
		}
	}
	for _, f := range o.DisableFeatures {
		add(f)
	}
	for _, e := range o.ExtraArgs {
		if v, ok := strings.CutPrefix(e, "--disable-features="); ok {
			for _, f := range strings.Split(v, ",") {
				add(f)
			}
		}
	}
	return list
}

// quicOrigin is the value of --origin-to-force-quic-on for h3.
func (o Options) quicOrigin() string {
	if o.ForceQUICOrigin != "" {
		return o.ForceQUICOrigin
	}
	origin, host := urlOrigin(o.URL)
	if o.AltSvcDiscovery {
		port := altSvcDummyPort
		if _, p, _ := net.SplitHostPort(origin); p == strconv.Itoa(port) {
			port++
		}
		return net.JoinHostPort(host, strconv.Itoa(port))
	}
	return origin
}
