package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

// firefoxCheck is doctor's check of the firefox client: Firefox and
// certutil found, and, as root, a headless Firefox started with a fresh
// profile inside an empty network namespace of its own (so that nothing it
// does reaches the host's network), reporting its version over WebDriver
// BiDi. Without root it reports the binary's --version only.
func firefoxCheck(ctx context.Context, root bool) (status, detail string) {
	const unavailable = "tests with the firefox client (page loads) are unavailable"
	exe, err := firefox.FindExe("")
	if err != nil {
		return checkWarn, fmt.Sprintf("%v: %s; install firefox-esr", err, unavailable)
	}
	if _, err := exec.LookPath("certutil"); err != nil {
		return checkWarn, fmt.Sprintf("%s found, but %v: %s", exe, firefox.ErrNoCertutil, unavailable)
	}
	if !root {
		out, err := exec.CommandContext(ctx, exe, "--version").Output()
		if err != nil {
			return checkWarn, fmt.Sprintf("%s --version: %v: %s", exe, err, unavailable)
		}
		return checkOK, fmt.Sprintf("%s (%s; not started: starting it in a namespace needs root)", exe, strings.TrimSpace(string(out)))
	}
	ns, err := netns.NewNamespace()
	if err != nil {
		return checkWarn, fmt.Sprintf("%s: no namespace to start it in: %v", exe, err)
	}
	defer ns.Close()
	path := fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), ns.Fd())
	if out, err := exec.CommandContext(ctx, "nsenter", "--net="+path, "--", "ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return checkWarn, fmt.Sprintf("%s: loopback of the check's namespace: %v: %s", exe, err, strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	start := time.Now()
	s, err := firefox.NewSession(ctx, firefox.Options{Protocol: model.ProtoH2, NetNS: path})
	if err != nil {
		return checkWarn, fmt.Sprintf("%s does not start: %v: %s", exe, err, unavailable)
	}
	took := time.Since(start)
	v := s.Version()
	if err := s.Close(); err != nil {
		return checkWarn, fmt.Sprintf("%s (%s) started, but closing it failed: %v", exe, v, err)
	}
	return checkOK, fmt.Sprintf("%s (%s, started headless in %v)", exe, v, took.Round(10*time.Millisecond))
}
