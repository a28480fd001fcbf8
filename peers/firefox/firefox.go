// Package firefox is the Firefox stack (stack.yaml beside this file): a
// real browser client with its own HTTP/3 stack (neqo), headless Debian
// firefox-esr driven over WebDriver BiDi by package firefox. It registers
// the client agent's Firefox: page loads (a fresh user context per sample
// in a Firefox kept across samples, which trusts the server's CA and, for
// h3, reaches the origin over HTTP/3 from its first request; see
// workload.KeptBrowsers), the bench page, the browser's product for the
// run's record, `quicbench fetch --client firefox`, and doctor's check.
package firefox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/quicbench/quicbench/browser"
	driver "github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

// Name is the stack's name in the registry.
const Name = "firefox"

func init() {
	peers.Provide(Name, peers.Hooks{Check: check})
	workload.RegisterClient(Name, newClient)
}

// options are a sample's browser options: the cell's protocol forced, the
// server's CA trusted in the profile, the HTTP cache disabled.
// A sample of a recorded page (req.Replay) resolves host names through the
// agent's host mapping only and, for h3, maps every origin to HTTP/3
// (driver.Options.ReplayOptions).
func options(req workload.Request, url string) driver.Options {
	o := driver.Options{
		URL:          url,
		Protocol:     req.Protocol,
		CAPEM:        []byte(req.Target.CAPEM),
		Timeout:      req.Timeout,
		DisableCache: true,
		KeyLogFile:   req.KeyLog,
	}
	if req.Replay != nil {
		o.ReplayOptions(req.Replay.Origins)
	}
	return o
}

// newClient is the agent's Firefox: one browser kept across samples for
// every protocol (NewContext sets the sample's protocol preferences in
// it), every sample in a fresh user context of it (workload.KeptBrowsers).
func newClient(workload.ClientEnv) workload.ClientImpl {
	inv := agentInvestigation()
	kept := workload.NewKeptBrowsers(workload.KeptSpec[*keptFirefox]{
		Key: func(req workload.Request, url string) (string, error) {
			o := options(req, url)
			if err := inv.applyFirefox(&o); err != nil {
				return "", err
			}
			return o.LaunchKey()
		},
		Start: func(ctx context.Context, req workload.Request, url string, startTimeout time.Duration) (*keptFirefox, error) {
			o := options(req, url)
			o.StartTimeout = startTimeout
			if err := inv.applyFirefox(&o); err != nil { // may set a longer start timeout
				return nil, err
			}
			s, err := driver.NewSession(ctx, o)
			if err != nil {
				return nil, err
			}
			return inv.keep(s), nil
		},
		NewContext: func(ctx context.Context, s *keptFirefox, req workload.Request, url string) (workload.PageContext, error) {
			o := options(req, url)
			o.StartTimeout = workload.StartTimeout(req)
			u, err := s.NewContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return u, nil
		},
		ProfilePrefix: driver.ProfilePrefix,
	})
	return workload.ClientImpl{
		Load:       kept.Loader(),
		Bench:      kept.Bench(),
		Close:      func() { _ = kept.Close() },
		Version:    Version,
		FetchPage:  fetchPage,
		FetchFlags: []string{"keylog", "har"},
		ReplayHint: replayHint,
	}
}

// Version starts the Firefox the agent's samples use, once, and returns
// its product ("Firefox/153.8.0"): the runner records it with the run, and
// a resumed run refuses another browser.
func Version(ctx context.Context) (string, error) {
	s, err := driver.NewSession(ctx, driver.Options{Protocol: model.ProtoH2})
	if err != nil {
		return "", err
	}
	v := s.Version()
	if err := s.Close(); err != nil {
		return "", fmt.Errorf("closing Firefox after reading its version: %w", err)
	}
	return v, nil
}

// fetchPage is `quicbench fetch --client firefox`: one cold load in a
// fresh Firefox that trusts the CA in its profile, or any certificate with
// Insecure, writing its TLS secrets to KeyLog when set (SSLKEYLOGFILE).
func fetchPage(ctx context.Context, o workload.PageFetch, url string) (*browser.Result, error) {
	opts := driver.Options{URL: url, Protocol: o.Proto, AcceptInsecureCerts: o.Insecure, CAPEM: o.CAPEM, DisableCache: true, Timeout: o.Timeout, KeyLogFile: o.KeyLog}
	var res *browser.Result
	var err error
	if o.HAR != nil {
		var h *har.HAR
		res, h, err = driver.LoadHAR(ctx, opts)
		if h != nil {
			o.HAR(h)
		}
	} else {
		res, err = driver.Load(ctx, opts)
	}
	var oe *driver.OptionError
	switch {
	case errors.Is(err, driver.ErrNoFirefox) || errors.Is(err, driver.ErrNoCertutil):
		return res, fmt.Errorf("%w: %v (install firefox-esr and libnss3-tools)", peers.ErrNotInstalled, err)
	case res == nil && errors.As(err, &oe):
		return nil, &workload.OptionError{Err: err}
	}
	return res, err
}

// check is the check of Firefox: Firefox and certutil found, and, for
// doctor's thorough check as root (peers.Deep), a headless Firefox started
// with a fresh profile inside an empty network namespace of its own (so
// that nothing it does reaches the host's network), reporting its version
// over WebDriver BiDi. Otherwise it reports the binary's --version only.
func check(ctx context.Context, _ string) (version, detail string, err error) {
	exe, err := driver.FindExe("")
	if err != nil {
		return "", "", fmt.Errorf("%w: %v; install firefox-esr", peers.ErrNotInstalled, err)
	}
	if _, err := exec.LookPath("certutil"); err != nil {
		return "", "", fmt.Errorf("%w: %s found, but %v", peers.ErrNotInstalled, exe, driver.ErrNoCertutil)
	}
	if os.Geteuid() != 0 || !peers.IsDeep(ctx) {
		out, err := exec.CommandContext(ctx, exe, "--version").Output()
		if err != nil {
			return "", "", fmt.Errorf("%s --version: %v", exe, err)
		}
		why := "not started: starting it in a namespace needs root"
		if os.Geteuid() == 0 {
			why = "found; quicbench doctor starts it"
		}
		return strings.TrimSpace(string(out)), exe + " (" + why + ")", nil
	}
	ns, err := netns.NewNamespace()
	if err != nil {
		return "", "", fmt.Errorf("%s: no namespace to start it in: %v", exe, err)
	}
	defer ns.Close()
	path := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd())
	if out, err := exec.CommandContext(ctx, "nsenter", "--net="+path, "--", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("%s: loopback of the check's namespace: %v: %s", exe, err, strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	s, err := driver.NewSession(ctx, driver.Options{Protocol: model.ProtoH2, NetNS: path})
	if err != nil {
		return "", "", fmt.Errorf("%s does not start: %v", exe, err)
	}
	took := time.Since(start)
	v := s.Version()
	if err := s.Close(); err != nil {
		return v, "", fmt.Errorf("%s (%s) started, but closing it failed: %v", exe, v, err)
	}
	return v, fmt.Sprintf("%s (started headless in %v)", exe, took.Round(10*time.Millisecond)), nil
}

// replayHint is how a user points Firefox at a replay served by hand: the
// names resolve through /etc/hosts (run it as quicbench replay's COMMAND),
// and for h3 every origin is mapped to HTTP/3.
func replayHint(_ map[string]string, origins []string, _ string) string {
	return fmt.Sprintf("names through /etc/hosts (run it as the COMMAND); for h3 network.http.http3.alt-svc-mapping-for-testing=%q", driver.H3Mappings(origins))
}
