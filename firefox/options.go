package firefox

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/model"
)

// Defaults applied by Options when a field is zero (the same as Chromium's).
const (
	DefaultTimeout      = browser.DefaultTimeout      // per page load
	DefaultStartTimeout = browser.DefaultStartTimeout // browser start until its BiDi session answers
)

// ErrNoFirefox is returned (wrapped) when no Firefox executable can be found.
var ErrNoFirefox = errors.New("no Firefox executable found (firefox-esr or firefox)")

// ErrNoCertutil is returned (wrapped) when Options.CAPEM is set but NSS's
// certutil, which imports the CA into the profile, is not installed.
var ErrNoCertutil = errors.New("certutil not found (Debian package libnss3-tools)")

// Options configure a page load or a Session.
type Options struct {
	// URL is the page to load. Load requires it. NewSession uses it only
	// to derive the HTTP/3 origin when Protocol is h3 and H3Origin is
	// empty; Session.Load takes its own URL.
	URL string

	// Protocol is what every resource must be fetched with: model.ProtoH1
	// (nextHopProtocol "http/1.1" over TLS), model.ProtoH1C ("http/1.1",
	// http:// URL), model.ProtoH2 ("h2") or model.ProtoH3 ("h3"). h1 and
	// h1c turn HTTP/2 and HTTP/3 off, h2 turns HTTP/3 off, and h3 maps the
	// origin to HTTP/3 with Firefox's testing preference (no Alt-Svc
	// discovery). Firefox may still fall back to TCP for h3: the
	// per-resource protocol check is what catches it.
	Protocol string

	// CAPEM holds the CA certificate(s), PEM, that issued the server's
	// certificate. They are imported into the fresh profile's NSS database
	// (certutil) as trusted for TLS servers. Either CAPEM or
	// AcceptInsecureCerts is needed for any https server whose certificate
	// is not publicly trusted.
	CAPEM []byte

	// AcceptInsecureCerts makes the session accept any server certificate
	// (the WebDriver capability), instead of trusting CAPEM.
	AcceptInsecureCerts bool

	// H3Origin is the host:port that Firefox must reach over HTTP/3 when
	// Protocol is h3: the URL's host is mapped to HTTP/3 on that port
	// (network.http.http3.alt-svc-mapping-for-testing). Empty means the
	// host and port of URL.
	H3Origin string

	// Exe is the Firefox binary. Empty means firefox-esr, then firefox, on
	// PATH.
	Exe string

	// NetNS, when set, is a network namespace file (e.g.
	// /run/netns/qbclient1) that Firefox is started in through nsenter(1);
	// the driver's WebSocket to Firefox's BiDi port (on 127.0.0.1 of that
	// namespace) is opened there too. Empty runs Firefox in the caller's
	// namespace.
	NetNS string

	// Timeout bounds each page load (navigation until the load event, then
	// reading the measurements). Zero means DefaultTimeout.
	Timeout time.Duration

	// StartTimeout bounds the browser start until its BiDi session is
	// ready. Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// ProfileDir is the parent directory of the fresh profile made for
	// each browser (and removed when it closes). Empty means os.TempDir().
	// It must exist.
	ProfileDir string

	// DisableCache turns every HTTP cache use off (the cache preferences
	// and BiDi's network.setCacheBehavior "bypass"), so that repeated
	// loads in a Session fetch every resource again, over warm
	// connections. A fresh profile starts with an empty cache anyway.
	DisableCache bool

	// Prefs are Firefox preferences set in addition to (or instead of)
	// those quicbench sets: a string, bool or int each.
	Prefs map[string]any

	// Output receives Firefox's stdout and stderr. Nil discards them.
	Output io.Writer

	// KeyLogFile, when set, is an absolute path Firefox (NSS) appends its
	// TLS secrets to: Firefox is started with SSLKEYLOGFILE set to it, for
	// a packet capture's decryption.
	KeyLogFile string
}

// OptionError is a bad field of Options: Load and NewSession return it
// before they start anything.
type OptionError struct {
	Field string // the Options field, e.g. "Protocol"
	Err   error
}

func (e *OptionError) Error() string { return "firefox: option " + e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause (ErrNoFirefox for an Exe that is not found,
// ErrNoCertutil when CAPEM cannot be imported).
func (e *OptionError) Unwrap() error { return e.Err }

// validate checks the options; needURL is true for Load. It returns a
// normalised copy with the defaults filled in, and the CA certificates of
// CAPEM.
func (o Options) validate(needURL bool) (Options, []*x509.Certificate, error) {
	bad := func(field, format string, args ...any) (Options, []*x509.Certificate, error) {
		return o, nil, &OptionError{Field: field, Err: fmt.Errorf(format, args...)}
	}
	if _, ok := browser.NextHopProtocol(o.Protocol); !ok {
		return bad("Protocol", "%q is not one of h1, h1c, h2, h3", o.Protocol)
	}
	if needURL || o.URL != "" {
		if err := browser.CheckURL(o.URL, o.Protocol); err != nil {
			return bad("URL", "%v", err)
		}
	}
	if o.H3Origin != "" {
		if o.Protocol != model.ProtoH3 {
			return bad("H3Origin", "only applies to protocol h3, not %s", o.Protocol)
		}
		if err := browser.CheckHostPort(o.H3Origin); err != nil {
			return bad("H3Origin", "%v", err)
		}
	}
	if o.Protocol == model.ProtoH3 && o.H3Origin == "" && o.URL == "" {
		return bad("H3Origin", "h3 needs H3Origin or URL to know which origin to map to HTTP/3")
	}
	if o.KeyLogFile != "" && !filepath.IsAbs(o.KeyLogFile) {
		return bad("KeyLogFile", "%q is not an absolute path", o.KeyLogFile)
	}
	var cas []*x509.Certificate
	if len(o.CAPEM) > 0 {
		if o.AcceptInsecureCerts {
			return bad("CAPEM", "cannot be combined with AcceptInsecureCerts")
		}
		rest := o.CAPEM
		for {
			var b *pem.Block
			b, rest = pem.Decode(rest)
			if b == nil {
				break
			}
			if b.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return bad("CAPEM", "certificate %d: %v", len(cas)+1, err)
			}
			cas = append(cas, c)
		}
		if len(cas) == 0 {
			return bad("CAPEM", "no certificate in the PEM data")
		}
		if _, err := exec.LookPath("certutil"); err != nil {
			return o, nil, &OptionError{Field: "CAPEM", Err: fmt.Errorf("%w: %v", ErrNoCertutil, err)}
		}
	}
	for name, v := range o.Prefs {
		switch v.(type) {
		case string, bool, int:
		default:
			return bad("Prefs", "%s: value %v (%T) is not a string, bool or int", name, v, v)
		}
		if name == "" {
			return bad("Prefs", "empty preference name")
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
	exe, err := FindExe(o.Exe)
	if err != nil {
		return o, nil, &OptionError{Field: "Exe", Err: err}
	}
	o.Exe = exe
	return o, cas, nil
}

// FindExe returns the Firefox binary to run: exe when given (a path or a
// name on PATH), else firefox-esr or firefox on PATH. Its error wraps
// ErrNoFirefox.
func FindExe(exe string) (string, error) {
	names := []string{"firefox-esr", "firefox"}
	if exe != "" {
		names = []string{exe}
	}
	var first error
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", fmt.Errorf("%w: %v", ErrNoFirefox, first)
}

// h3Mapping is the value of network.http.http3.alt-svc-mapping-for-testing
// for h3: "HOST;h3=:PORT", the origin's host served over HTTP/3 on PORT.
func (o Options) h3Mapping() string {
	hp := o.H3Origin
	if hp == "" {
		p, err := url.Parse(o.URL)
		if err != nil {
			return ""
		}
		port := p.Port()
		if port == "" {
			port = "443"
		}
		hp = net.JoinHostPort(p.Hostname(), port)
	}
	host, port, _ := net.SplitHostPort(hp)
	return host + ";h3=:" + port
}
