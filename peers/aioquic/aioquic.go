// Package aioquic is the aioquic stack (stack.yaml beside this file): a
// second QUIC and HTTP/3 implementation, in Python, as a server and as a
// client. Both are programs of this folder, carried in the binary and run
// with the interpreter of the virtual environment scripts/setup.sh makes
// (peers/aioquic/.venv, requirements.txt pins Version with hashes), and
// both speak quicbench's peer program protocol (docs/peers.md):
//
//   - server.py, started by `quicbench serve --impl aioquic` in the server
//     namespace (endpoint.RunProgram): it serves quicbench's resources
//     byte-identical to quicbench's own server and reports each
//     connection's statistics from aioquic's recovery state;
//   - client.py, run by the client agent once per sample (package
//     program): it makes the built-in client's requests and records them
//     as the built-in client does.
//
// aioquic exposes no statistics API: both programs read private attributes
// of the pinned release, which their self-checks (Check) exercise.
package aioquic

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/peers/program"
	"github.com/quicbench/quicbench/workload"
)

// Name is the stack's name in the registry.
const Name = "aioquic"

// Version is the aioquic release requirements.txt pins, whose private
// recovery state both programs read.
const Version = "1.7.2"

// ServerProgram and ClientProgram are server.py and client.py, carried in
// the binary so that the programs run always match this package.
var (
	//go:embed server.py
	ServerProgram []byte
	//go:embed client.py
	ClientProgram string
)

func init() {
	peers.Provide(Name, peers.Hooks{Check: check})
	endpoint.RegisterPeer(Name, launch)
	workload.RegisterClient(Name, newClient)
}

// EnvVar names the environment variable that tells FindPython where the
// stack is installed: a directory holding .venv (like peers/aioquic).
const EnvVar = "QUICBENCH_AIOQUIC"

// RcvBufEnv names the environment variable that, set to "default" in the
// agent's environment (the runner's), leaves the client's UDP receive
// buffer at the kernel's default, for studying the receiver drops it
// causes (docs/metrics.md, "Peer clients").
const RcvBufEnv = "QUICBENCH_AIOQUIC_RCVBUF"

const venvDir = "peers/aioquic"

const installHint = "install it with `bash scripts/setup.sh` in the quicbench repository " +
	"(python3 -m venv peers/aioquic/.venv && peers/aioquic/.venv/bin/pip install --require-hashes -r peers/aioquic/requirements.txt), " +
	"or set " + EnvVar + " to a directory holding such a .venv"

// FindPython returns the Python interpreter of the stack's virtual
// environment. It looks at $QUICBENCH_AIOQUIC when set (and only there),
// else at peers/aioquic/.venv next to the executable and its parent
// directory (bin/quicbench in the repository), then in the working
// directory and each of its parents (tests run in a package directory).
func FindPython() (python string, err error) {
	if v := os.Getenv(EnvVar); v != "" {
		p := filepath.Join(v, ".venv", "bin", "python")
		if isExec(p) {
			return p, nil
		}
		return "", fmt.Errorf("%w: %s=%q holds no .venv/bin/python; %s", peers.ErrNotInstalled, EnvVar, v, installHint)
	}
	var tried []string
	try := func(dir string) (string, bool) {
		p := filepath.Join(dir, venvDir, ".venv", "bin", "python")
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
	return "", fmt.Errorf("%w: aioquic: no %s among %s; %s", peers.ErrNotInstalled, filepath.Join(venvDir, ".venv/bin/python"), strings.Join(tried, ", "), installHint)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// check is the stack's check (quicbench doctor, the runner's preflight):
// the interpreter is there and the role's program passes its self-check
// on the pinned aioquic.
func check(ctx context.Context, role string) (version, detail string, err error) {
	py, err := FindPython()
	if err != nil {
		return "", "", err
	}
	switch role {
	case peers.RoleServer:
		v, _, err := CheckServer(ctx, py)
		if err != nil {
			return "", "", err
		}
		return "aioquic " + v, py + ": the server's statistics accessors work", nil
	default:
		v, err := CheckClient(ctx, py)
		if err != nil {
			return "", "", err
		}
		return "aioquic " + v, py + ": the client's recovery statistics are readable", nil
	}
}

// CheckServer runs the server program's self-check with python (server.py
// --check): it builds a QUIC connection in memory and reads its transport
// statistics through the private attributes of aioquic the server relies
// on. It returns aioquic's version and what was read (JSON), or why it
// does not work: the check fails, or the installed aioquic is not Version
// (the version is then returned too).
func CheckServer(ctx context.Context, python string) (version, out string, err error) {
	dir, err := os.MkdirTemp("", "qb-aioquic-check-")
	if err != nil {
		return "", "", err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "server.py")
	if err := os.WriteFile(script, ServerProgram, 0o600); err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, python, script, "--check").CombinedOutput()
	out = strings.TrimSpace(string(b))
	if err != nil {
		return "", out, fmt.Errorf("aioquic self-check (%s server.py --check): %v: %s", python, err, out)
	}
	var rep struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Version == "" {
		return "", out, fmt.Errorf("aioquic self-check printed no version: %s", out)
	}
	if rep.Version != Version {
		return rep.Version, out, fmt.Errorf("aioquic %s is installed in %s, but quicbench reads the statistics of aioquic %s: run scripts/setup.sh", rep.Version, python, Version)
	}
	return rep.Version, out, nil
}

// CheckClient runs the client program's self-check with python (client.py
// --check): it builds an aioquic client connection in memory, lets it send
// and time out, and reads its recovery state through the private
// attributes the client relies on. It returns aioquic's version, or why
// the client cannot work.
func CheckClient(ctx context.Context, python string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, python, "-I", "-c", ClientProgram, "--check").CombinedOutput()
	out := strings.TrimSpace(string(b))
	if err != nil {
		return "", fmt.Errorf("aioquic client self-check (%s client.py --check): %v: %s", python, err, out)
	}
	var rep struct {
		Version string `json:"aioquic_version"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Version == "" {
		return "", fmt.Errorf("aioquic client self-check printed no version: %q", out)
	}
	if rep.Version != Version {
		return rep.Version, fmt.Errorf("aioquic %s is installed, the client needs %s (peers/aioquic/requirements.txt)", rep.Version, Version)
	}
	return rep.Version, nil
}

// launch starts server.py in the server namespace (the peer program
// protocol: endpoint.RunProgram) with the server's configuration: the QUIC
// congestion control the plan asks for when aioquic runs it, full-size
// datagrams, quic-go's windows (docs/peers.md).
func launch(ctx context.Context, p *endpoint.PeerServer) error {
	python, err := FindPython()
	if err != nil {
		return err
	}
	conf, err := p.ProgramConfig()
	if err != nil {
		return err
	}
	script := filepath.Join(p.Dir(), "server.py")
	if err := os.WriteFile(script, ServerProgram, 0o600); err != nil {
		return err
	}
	return p.RunProgram(ctx, []string{python, script}, []string{"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"}, conf,
		func(r endpoint.ProgramReady) (string, error) {
			if r.Version != Version {
				return "", fmt.Errorf("aioquic %s found, but quicbench reads the statistics of aioquic %s (private attributes): "+
					"reinstall the pinned version with scripts/setup.sh", r.Version, Version)
			}
			return "aioquic " + r.Version, nil
		})
}

// newClient is the agent's aioquic client: every sample runs client.py with
// the interpreter of the virtual environment, inside the client namespace
// like the agent. The interpreter is looked for once, at the first sample.
func newClient(env workload.ClientEnv) workload.ClientImpl {
	find := sync.OnceValues(FindPython)
	st, _ := peers.ClientStack(Name)
	return workload.ClientImpl{
		Fetch: func(ctx context.Context, req workload.Request, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
			py, err := find()
			if err != nil {
				return nil, nil, err
			}
			// -I: isolated mode (no PYTHON* variables, no user site directory).
			c := &program.Client{Name: Name, Argv: []string{py, "-I", "-c", ClientProgram}, CC: st.Client.CC, KeyLog: req.KeyLog}
			switch v := env.Getenv(RcvBufEnv); v {
			case "":
			case "default":
				c.RcvBuf = -1
			default:
				return nil, nil, fmt.Errorf("%s=%q: want \"default\" or nothing", RcvBufEnv, v)
			}
			return c.Fetch(ctx, req, spec)
		},
	}
}
