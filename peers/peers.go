// Package peers names the server implementations quicbench can run in a
// testbed's server namespace besides its own (docs/peers.md): aioquic, a
// second QUIC and HTTP/3 stack in Python, and Caddy, a production web server.
// It says which tests each can serve and finds their installations. The
// programs themselves live beside this file: peers/aioquic (server.py, its
// locked requirements and, once scripts/setup.sh ran, its .venv) and
// Debian's caddy package. `quicbench serve --impl NAME` runs them
// (endpoint.StartPeer).
//
// This package imports nothing of quicbench's, so that the plan and the
// runner can ask it which tests an implementation can serve.
package peers

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Server implementations.
const (
	Quicbench = "quicbench" // quicbench's own server (endpoint.StartServer)
	Aioquic   = "aioquic"   // aioquic's HTTP/3 (peers/aioquic/server.py)
	Caddy     = "caddy"     // Debian's caddy, static files only
)

// Impls lists the server implementations, quicbench's own first.
var Impls = []string{Quicbench, Aioquic, Caddy}

// AioquicVersion is the aioquic release peers/aioquic/requirements.txt pins.
// Its server reads transport statistics from private attributes of this
// release (see AioquicCheck).
const AioquicVersion = "1.7.2"

// AioquicServer is peers/aioquic/server.py, carried in the binary so that
// the program the wrapper runs always matches the wrapper.
//
//go:embed aioquic/server.py
var AioquicServer []byte

// Protocols returns the protocols (model.Proto* names) impl serves, or nil
// for an unknown impl. quicbench's own server serves them all.
func Protocols(impl string) []string {
	switch impl {
	case Quicbench:
		return []string{"h1", "h1c", "h2", "h3", "tcp", "quic"}
	case Aioquic:
		return []string{"h3"}
	case Caddy:
		return []string{"h1", "h2", "h3"}
	}
	return nil
}

// cannot maps impl to the tests it cannot serve, with the reason.
var cannot = map[string]map[string]string{
	Quicbench: {},
	Aioquic: {
		"fairness": fairnessWhy,
	},
	Caddy: {
		"fairness": fairnessWhy,
		"upload":   "Caddy serves static files only: /upload (a POST whose body the server counts) has no static equivalent",
		"stream":   "Caddy serves static files only: /stream paces its segments in time, which a file cannot",
	},
}

// tests are the test names of package plan (plan.Test*), repeated here so
// that this package imports nothing of quicbench's; a test of package peers
// checks they match.
var tests = []string{"latency", "ttfb", "handshake", "download", "upload", "multiplex", "stream", "page", "site", "cpu", "fairness"}

// fairnessWhy is why no peer serves the fairness test: its flows are bulk
// transfers that the runner opens between the namespaces itself (package
// traffic), not requests to the cell's server.
const fairnessWhy = "the fairness test's flows are quicbench's own bulk transfers between the namespaces, not requests to a server"

// Serves reports whether impl can serve test (a plan.Test* name) and, when
// not, why. Unknown implementations and tests are errors.
func Serves(impl, test string) (ok bool, reason string, err error) {
	no, known := cannot[impl]
	if !known {
		return false, "", fmt.Errorf("unknown server implementation %q (known: %s)", impl, strings.Join(Impls, ", "))
	}
	if !slices.Contains(tests, test) {
		return false, "", fmt.Errorf("unknown test %q", test)
	}
	if why, bad := no[test]; bad {
		return false, why, nil
	}
	return true, "", nil
}

// Tests returns the tests impl can serve, in a fixed order.
func Tests(impl string) []string {
	var out []string
	for _, t := range tests {
		if ok, _, _ := Serves(impl, t); ok {
			out = append(out, t)
		}
	}
	return out
}

// ErrNotInstalled is wrapped by the errors of FindAioquic and FindCaddy.
var ErrNotInstalled = errors.New("peer not installed")

// AioquicEnvVar names the environment variable that tells FindAioquic where
// the aioquic peer is: a directory holding .venv (like peers/aioquic).
const AioquicEnvVar = "QUICBENCH_AIOQUIC"

const aioquicDir = "peers/aioquic"

const aioquicHint = "install it with `bash scripts/setup.sh` in the quicbench repository " +
	"(python3 -m venv peers/aioquic/.venv && peers/aioquic/.venv/bin/pip install --require-hashes -r peers/aioquic/requirements.txt), " +
	"or set " + AioquicEnvVar + " to a directory holding such a .venv"

// FindAioquic returns the Python interpreter of the aioquic peer's virtual
// environment. It looks at $QUICBENCH_AIOQUIC when set (and only there),
// else at peers/aioquic/.venv next to the executable and its parent
// directory (bin/quicbench in the repository), then in the working
// directory and each of its parents (tests run in a package directory).
func FindAioquic() (python string, err error) {
	if v := os.Getenv(AioquicEnvVar); v != "" {
		p := filepath.Join(v, ".venv", "bin", "python")
		if isExec(p) {
			return p, nil
		}
		return "", fmt.Errorf("%w: %s=%q holds no .venv/bin/python; %s", ErrNotInstalled, AioquicEnvVar, v, aioquicHint)
	}
	var tried []string
	try := func(dir string) (string, bool) {
		p := filepath.Join(dir, aioquicDir, ".venv", "bin", "python")
		if slices.Contains(tried, p) {
			return "", false
		}
		tried = append(tried, p)
		return p, isExec(p)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		for _, d := range []string{filepath.Dir(exe), filepath.Dir(filepath.Dir(exe))} {
			if p, ok := try(d); ok {
				return p, nil
			}
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if p, ok := try(d); ok {
				return p, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("%w: aioquic: no %s among %s; %s", ErrNotInstalled, filepath.Join(aioquicDir, ".venv/bin/python"), strings.Join(tried, ", "), aioquicHint)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// AioquicCheck runs the embedded server program's self-check with python
// (server.py --check): it builds a QUIC connection in memory and reads its
// transport statistics through the private attributes of aioquic the
// server relies on. It returns aioquic's version and what was read (JSON),
// or why it does not work: the check fails, or the installed aioquic is not
// AioquicVersion, whose private attributes the statistics are read from
// (the version is then returned too).
func AioquicCheck(ctx context.Context, python string) (version, out string, err error) {
	dir, err := os.MkdirTemp("", "qb-aioquic-check-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "server.py")
	if err := os.WriteFile(script, AioquicServer, 0o600); err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, python, script, "--check").CombinedOutput()
	out = strings.TrimSpace(string(b))
	if err != nil {
		return "", out, fmt.Errorf("aioquic self-check (%s server.py --check): %v: %s", python, err, out)
	}
	var v string
	if i := strings.Index(out, `"version": "`); i >= 0 {
		v, _, _ = strings.Cut(out[i+len(`"version": "`):], `"`)
	}
	if v == "" {
		return "", out, fmt.Errorf("aioquic self-check printed no version: %s", out)
	}
	if v != AioquicVersion {
		return v, out, fmt.Errorf("aioquic %s is installed in %s, but quicbench reads the statistics of aioquic %s: run scripts/setup.sh", v, python, AioquicVersion)
	}
	return v, out, nil
}

// FindCaddy returns the caddy executable on PATH and its version (as
// `caddy version` prints its first word, e.g. "2.6.2" or "v2.7.6").
func FindCaddy(ctx context.Context) (path, version string, err error) {
	path, err = exec.LookPath("caddy")
	if err != nil {
		return "", "", fmt.Errorf("%w: caddy is not on PATH: install it with `apt-get install caddy` (or `bash scripts/setup.sh`)", ErrNotInstalled)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, path, "version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%w: %s version: %v", ErrNotInstalled, path, err)
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "", "", fmt.Errorf("%w: %s version printed nothing", ErrNotInstalled, path)
	}
	return path, f[0], nil
}
