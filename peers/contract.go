package peers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
)

// ContractPort is the port a contract stack's server listens on: the
// quic-interop-runner's 443 (also given to it as PORT).
const ContractPort = 443

// ContractDecl is a stack a plan declares with the quic-interop-runner's
// endpoint contract (docs/plan-format.md, "Stacks of your own"): its name,
// the command (its run_endpoint.sh) and which roles and protocols it takes.
type ContractDecl struct {
	Name      string   `yaml:"name" json:"name"`
	Command   string   `yaml:"command" json:"command"`
	Roles     []string `yaml:"roles" json:"roles"`
	Protocols []string `yaml:"protocols" json:"protocols"`
}

// Testcase is the interop runner's TESTCASE for a cell of protocol proto:
// "http3" for h3, "transfer" (HTTP/0.9 over QUIC, hq-interop) for quic.
func Testcase(proto string) string {
	if proto == model.ProtoQUIC {
		return "transfer"
	}
	return "http3"
}

// Contract turns a declaration into a stack: a server launched through its
// command (ROLE=server) that serves the files quicbench writes to /www, and
// a client run through it (ROLE=client) that downloads the files of
// REQUESTS to /downloads, timed on the wire by the emulator. dir is the
// directory a relative command is relative to (the declaring file's);
// origin names the declaring file in errors. The command must be an
// executable file.
func Contract(d ContractDecl, dir, origin string) (*Stack, error) {
	fail := func(format string, args ...any) (*Stack, error) {
		return nil, fmt.Errorf("%s: stack %q: %s", origin, d.Name, fmt.Sprintf(format, args...))
	}
	if d.Command == "" {
		return fail("no command: give its run_endpoint.sh")
	}
	cmd := d.Command
	if !filepath.IsAbs(cmd) {
		cmd = filepath.Join(dir, cmd)
	}
	fi, err := os.Stat(cmd)
	switch {
	case err != nil:
		return fail("command %s: %v", d.Command, err)
	case !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0:
		return fail("command %s is not an executable file", cmd)
	}
	if len(d.Roles) == 0 {
		return fail("no roles: give [server], [client] or both")
	}
	protos := d.Protocols
	if len(protos) == 0 {
		protos = []string{model.ProtoH3}
	}
	for _, p := range protos {
		if p != model.ProtoH3 && p != model.ProtoQUIC {
			return fail("protocol %q: the endpoint contract's testcases are http3 (h3) and transfer (quic)", p)
		}
	}
	st := &Stack{
		Name: d.Name, Label: d.Name, Command: cmd, Origin: origin,
		About:   "a stack declared with the quic-interop-runner's endpoint contract: " + cmd,
		Install: "what its command needs, installed by its user",
	}
	ccs := CC{QUICHow: "unknown: the stack chooses its own, and reports none"}
	for _, r := range d.Roles {
		switch r {
		case RoleServer:
			st.Server = &Server{
				Protocols: slices.Clone(protos), Launch: LaunchCommand, Port: ContractPort, CC: ccs,
				Stats:  "none: a contract stack reports no statistics (the client's side, and the wire's, are kept)",
				Cannot: contractCannot,
			}
		case RoleClient:
			st.Client = &Client{
				Kind: KindCommand, Protocols: slices.Clone(protos), Tests: slices.Clone(ContractTests), CC: ccs,
				Exclusive: "a contract client's program and its CPU are unknown",
				Stats:     "none: its timings come from the wire (the emulator sees every packet)",
				Note:      "a contract client: timed on the wire from its first packet to the server's last data packet, its program's start not measured",
			}
		default:
			return fail("role %q: want server or client", r)
		}
	}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return st, nil
}

// ContractTests are the tests a contract client runs: those that reduce to
// fetching files (a page as its document and objects requested at once).
var ContractTests = []string{"download", "ttfb", "multiplex", "page"}

// contractCannot are the tests a contract server cannot serve, and why.
var contractCannot = map[string]string{
	"upload":    "a contract server serves the files of /www: /upload (a POST whose body the server counts) has none",
	"stream":    "a contract server serves the files of /www: /stream paces its segments in time, which a file cannot",
	"page":      "a contract server serves the files of /www by their paths: a page's document and the directory of its objects share one",
	"site":      "a contract server serves the files of /www by their paths: a site's index shares its path with its directory",
	"handshake": "a contract server's session resumption and 0-RTT are its own, and unknown",
	"cpu":       "a contract server's CPU is its command's whole process tree, whatever it runs",
}

var declared = map[string]*Stack{}

// Declare adds contract stacks to the registry for the rest of the process,
// so that plans, the runner and the statistics find them by name. A name
// of a built-in stack is refused; declaring a name again is allowed only
// with the same description.
func Declare(stacks ...*Stack) error {
	mu.Lock()
	defer mu.Unlock()
	for _, s := range stacks {
		if !s.IsCommand() {
			return fmt.Errorf("%s: only contract stacks can be declared", s.Name)
		}
		if o, ok := declared[s.Name]; ok {
			a, b := *o, *s
			a.Origin, b.Origin = "", ""
			if !reflect.DeepEqual(a, b) {
				return fmt.Errorf("%s: stack %q is already declared otherwise, by %s", s.Origin, s.Name, o.Origin)
			}
			continue
		}
		for _, b := range order {
			if b.Name == s.Name || b.ClientName() == s.Name {
				return fmt.Errorf("%s: stack %q: the name is a built-in stack's (%s)", s.Origin, s.Name, b.Origin)
			}
		}
		declared[s.Name] = s
		if s.Server != nil {
			servers[s.Name] = s
		}
		if s.Client != nil {
			clients[s.Name] = s
		}
	}
	return nil
}

// checkCommand checks a contract stack: its command exists and is
// executable.
func checkCommand(s *Stack) (version, detail string, err error) {
	path, err := exec.LookPath(s.Command)
	if err != nil {
		return "", "", fmt.Errorf("%s: command %s: %w: %v", s.Name, s.Command, ErrNotInstalled, err)
	}
	return s.Name + " (contract)", fmt.Sprintf("%s, declared in %s", path, s.Origin), nil
}

// Commands lists the commands of contract stacks, "NAME: COMMAND (roles)",
// for saying what a plan would run.
func Commands(stacks []*Stack) []string {
	var out []string
	for _, s := range stacks {
		if s.IsCommand() {
			out = append(out, fmt.Sprintf("%s: %s (%s)", s.Name, s.Command, strings.Join(s.Roles(), ", ")))
		}
	}
	return out
}
