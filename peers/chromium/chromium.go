// Package chromium is the Chromium stack (stack.yaml beside this file): a
// real browser client, headless Debian chromium driven over the DevTools
// protocol by package browser. It registers the client agent's Chromium:
// page loads (a fresh browser context per sample in a Chromium kept across
// samples, connection cold or warm; see workload.KeptBrowsers), the bench
// page for the other tests, the browser's product for the run's record,
// `quicbench fetch --client chromium`, and doctor's check.
package chromium

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

// Name is the stack's name in the registry.
const Name = "chromium"

func init() {
	peers.Provide(Name, peers.Hooks{Check: check})
	workload.RegisterClient(Name, newClient)
}

// options are a sample's browser options: the cell's protocol forced, the
// server's certificate pinned, the HTTP cache disabled.
// A sample of a recorded page (req.Replay) maps every recorded host name to
// its origin's address and, for h3, forces QUIC on every origin
// (browser.Options.ReplayOptions).
func options(req workload.Request, url string) browser.Options {
	o := browser.Options{
		URL:          url,
		Protocol:     req.Protocol,
		SPKIHash:     req.Target.SPKI,
		Timeout:      req.Timeout,
		DisableCache: true,
		KeyLogFile:   req.KeyLog,
	}
	if req.Replay != nil {
		o.ReplayOptions(req.Replay.Hosts, req.Replay.Origins)
	}
	return o
}

// newClient is the agent's Chromium: a browser per set of protocol
// switches (h1, h2, h3: they are process-wide) kept across samples, every
// sample in a fresh browser context of it (workload.KeptBrowsers).
func newClient(workload.ClientEnv) workload.ClientImpl {
	kept := workload.NewKeptBrowsers(workload.KeptSpec[*browser.Session]{
		Key: func(req workload.Request, url string) (string, error) { return options(req, url).LaunchKey() },
		Start: func(ctx context.Context, req workload.Request, url string, startTimeout time.Duration) (*browser.Session, error) {
			o := options(req, url)
			o.StartTimeout = startTimeout
			if err := applyNetLog(&o, os.Getenv(netLogEnv)); err != nil {
				return nil, err
			}
			return browser.NewSession(ctx, o)
		},
		NewContext: func(ctx context.Context, s *browser.Session, req workload.Request, url string) (workload.PageContext, error) {
			o := options(req, url)
			o.StartTimeout = workload.StartTimeout(req)
			c, err := s.NewContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return c, nil
		},
		ProfilePrefix: browser.ProfilePrefix,
	})
	return workload.ClientImpl{
		Load:       kept.Loader(),
		Bench:      kept.Bench(),
		Close:      func() { _ = kept.Close() },
		Version:    Version,
		FetchPage:  fetchPage,
		FetchFlags: []string{"spki", "server-name", "keylog", "har", "har-bodies"},
		ReplayHint: replayHint,
		Record:     record,
	}
}

// Version starts the Chromium the agent's samples use, once, and returns
// its product ("Chrome/156.0.8078.79"): the runner records it with the
// run, and a resumed run refuses another browser.
func Version(ctx context.Context) (string, error) {
	s, err := browser.NewSession(ctx, browser.Options{Protocol: model.ProtoH2})
	if err != nil {
		return "", err
	}
	v := s.Version()
	if err := s.Close(); err != nil {
		return "", fmt.Errorf("closing the browser after reading its version: %w", err)
	}
	return v, nil
}

// check finds the Chromium executable (doctor starts no browser here: the
// runner's preflight and the first sample do).
func check(context.Context, string) (version, detail string, err error) {
	exe, err := browser.FindExe("")
	if err != nil {
		return "", "", fmt.Errorf("%w: %v: install chromium", peers.ErrNotInstalled, err)
	}
	return "", exe, nil
}

// spkiDialTimeout bounds reading the server certificate for the pin.
const spkiDialTimeout = 10 * time.Second

// fetchPage is `quicbench fetch --client chromium`: one cold load in a
// fresh Chromium that trusts the server's certificate by its SPKI pin
// (read from the server, verified with the CA unless insecure, when not
// given).
func fetchPage(ctx context.Context, o workload.PageFetch, url string) (*browser.Result, error) {
	if o.SPKI != "" && (o.CAPEM != nil || o.Insecure) {
		return nil, &workload.OptionError{Err: errors.New("--spki excludes --ca and --insecure: with --spki the certificate is not read from the server")}
	}
	opts := browser.Options{URL: url, Protocol: o.Proto, SPKIHash: o.SPKI, DisableCache: true, Timeout: o.Timeout}
	if o.KeyLog != "" {
		abs, err := filepath.Abs(o.KeyLog)
		if err != nil {
			return nil, &workload.OptionError{Err: fmt.Errorf("--keylog: %w", err)}
		}
		opts.ExtraArgs = append(opts.ExtraArgs, "--ssl-key-log-file="+abs)
	}
	if opts.SPKIHash == "" && o.Proto != model.ProtoH1C {
		var roots *x509.CertPool
		if o.CAPEM != nil {
			var err error
			if roots, err = certs.PoolFromPEM(o.CAPEM); err != nil {
				return nil, &workload.OptionError{Err: fmt.Errorf("--ca: %w", err)}
			}
		}
		serverName := o.ServerName
		if serverName == "" {
			serverName, _, _ = net.SplitHostPort(o.Addr)
		}
		conf := &tls.Config{RootCAs: roots, ServerName: serverName, InsecureSkipVerify: o.Insecure} //nolint:gosec // explicit user choice (--insecure)
		pin, err := serverSPKI(ctx, o.Addr, o.Proto, conf)
		if err != nil {
			return nil, fmt.Errorf("reading the server certificate for Chromium's SPKI pin (give --ca FILE, --insecure, or --spki HASH): %w", err)
		}
		opts.SPKIHash = pin
	}
	var res *browser.Result
	var err error
	if o.HAR != nil {
		var h *har.HAR
		res, h, err = browser.LoadHAR(ctx, opts, o.HARBodies)
		if h != nil {
			o.HAR(h)
		}
	} else {
		res, err = browser.Load(ctx, opts)
	}
	var oe *browser.OptionError
	switch {
	case errors.Is(err, browser.ErrNoBrowser):
		return res, fmt.Errorf("%w: %v (install chromium)", peers.ErrNotInstalled, err)
	case res == nil && errors.As(err, &oe):
		return nil, &workload.OptionError{Err: err}
	}
	return res, err
}

// serverSPKI reads the server's leaf certificate with one TLS handshake
// (over QUIC for h3, the listener Chromium will use; TLS over TCP
// otherwise) and returns its SPKI hash for Chromium's pin list.
func serverSPKI(ctx context.Context, addr, proto string, conf *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, spkiDialTimeout)
	defer cancel()
	var chain []*x509.Certificate
	if proto == model.ProtoH3 {
		conf.NextProtos = []string{h3.ALPN}
		c, err := h3.PeerCertificates(ctx, addr, conf)
		if err != nil {
			return "", fmt.Errorf("QUIC handshake with %s: %w", addr, err)
		}
		chain = c
	} else {
		conf.NextProtos = []string{"h2", "http/1.1"}
		d := tls.Dialer{Config: conf}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return "", fmt.Errorf("TLS handshake with %s: %w", addr, err)
		}
		chain = c.(*tls.Conn).ConnectionState().PeerCertificates
		_ = c.Close()
	}
	if len(chain) == 0 {
		return "", fmt.Errorf("%s sent no certificate", addr)
	}
	return browser.SPKIHash(chain[0]), nil
}

// replayHint is how a user points Chromium at a replay served by hand: the
// host mapping and the pin as switches, and for h3 the origins to reach
// over QUIC directly.
func replayHint(hosts map[string]string, origins []string, spki string) string {
	return fmt.Sprintf("--host-resolver-rules=%q --ignore-certificate-errors-spki-list=%s\n  for h3 also --origin-to-force-quic-on=%s",
		browser.HostResolverRules(hosts), spki, strings.Join(origins, ","))
}

// record is `quicbench record` in headless Chromium: the DevTools
// protocol's network events and response bodies as a HAR (browser.Record).
func record(ctx context.Context, o workload.RecordSpec) (*har.HAR, error) {
	opts := browser.Options{Protocol: o.Proto, SPKIHash: o.SPKI, Timeout: o.Timeout, ExtraArgs: o.Args}
	h, err := browser.Record(ctx, opts, o.URL, browser.RecordOptions{Quiet: o.Quiet})
	if errors.Is(err, browser.ErrNoBrowser) {
		return nil, fmt.Errorf("%w: %v (install chromium)", peers.ErrNotInstalled, err)
	}
	return h, err
}
