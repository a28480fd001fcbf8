// Package peers is quicbench's registry of stacks: every implementation
// that can serve or take a sample (quicbench's own endpoints, aioquic,
// Caddy, Chromium, Firefox, Lighthouse, ngtcp2, and any stack a user
// declares with the quic-interop-runner's endpoint contract) is described
// here once, by a Stack.
//
// A built-in stack lives in a folder of its own under peers/ (peers/NAME),
// whose stack.yaml is its description, embedded in this package so that
// plans, statistics and reports can read every description without linking
// the stacks' code. The code that runs a stack (its server launcher, its
// client, its checks) lives in the Go package of that folder, or in the
// packages the description lists (Chromium's driver is package browser),
// and registers itself at init: with endpoint.RegisterPeer, with
// workload.RegisterClient and with Provide here. Package peers/all links
// every built-in stack's code into a program.
//
// No package outside a stack's folder, the packages its description lists
// and this registry names a particular stack: the runner, the plan
// validator, the statistics, the report, doctor and fetch ask the registry
// (stacks_test.go at the module root enforces it). Adding a stack is one
// folder under peers/, its tests, and its install lines in scripts/setup.sh
// (docs/architecture.md, "Adding a stack").
//
// This package imports only the standard library, package model and a YAML
// decoder, so that every layer may ask it.
package peers

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quicbench/quicbench/model"
)

// Roles a stack can take in a sample.
const (
	RoleServer = "server"
	RoleClient = "client"
)

// Server launch kinds: how `quicbench serve --impl NAME` runs a server.
const (
	// LaunchOwn is quicbench's own server (package endpoint).
	LaunchOwn = "quicbench"
	// LaunchProgram is a program speaking quicbench's peer program
	// protocol (docs/peers.md): a JSON configuration file in, JSON lines
	// out (ready, open, end with the connection's statistics). It serves
	// quicbench's resources itself, byte-identical to quicbench's server.
	LaunchProgram = "program"
	// LaunchFiles is a web server serving files that quicbench writes to
	// disk before it starts (/bytes/N, /page/N/S and its objects, sites).
	LaunchFiles = "files"
	// LaunchCommand is the quic-interop-runner's endpoint contract: a
	// command run with ROLE=server and the contract's environment and
	// directories (docs/peers.md, "The endpoint contract").
	LaunchCommand = "command"
)

// Client kinds: how a client takes a sample.
const (
	// KindBuiltin is quicbench's own client.
	KindBuiltin = "builtin"
	// KindFetch is a program that makes the built-in client's requests
	// and records them as the built-in client does, so that the test's
	// metrics come from the same code.
	KindFetch = "fetch"
	// KindBrowser loads pages in a real browser (page and site tests) and,
	// with Bench, runs the other tests in quicbench's bench page.
	KindBrowser = "browser"
	// KindAudit audits page loads in a browser of its own (cold loads
	// only, its own primary metric).
	KindAudit = "audit"
	// KindCommand is the interop runner's endpoint contract run with
	// ROLE=client: it downloads files; its timings come from the wire.
	KindCommand = "command"
)

// TCPKernel says that a stack's TCP connections take the testbed's
// congestion control: the plan's cc, which the testbed's routes impose on
// every TCP connection across the link (netns.Testbed.SetCC).
const TCPKernel = "kernel"

// CC says which congestion controls a stack runs and how they are chosen.
type CC struct {
	// TCP is TCPKernel for a stack over the kernel's TCP, "" for a stack
	// without TCP.
	TCP string `yaml:"tcp"`
	// QUIC lists the algorithms (model.CongestionControls names) the stack
	// runs over QUIC when asked; empty for a stack without QUIC.
	QUIC []string `yaml:"quic"`
	// QUICDefault is what the stack runs over QUIC when the plan's cc is
	// not one it can run (one of QUIC).
	QUICDefault string `yaml:"quic_default"`
	// QUICHow says how quicbench sets it ("fixed" when the stack cannot
	// choose), for the docs and doctor.
	QUICHow string `yaml:"quic_how"`
}

// QUICFor returns the algorithm the stack runs over QUIC in a cell whose
// plan asks for cc, and whether that is what was asked (matched).
func (c CC) QUICFor(cc string) (algo string, matched bool) {
	if slices.Contains(c.QUIC, cc) {
		return cc, true
	}
	return c.QUICDefault, false
}

// Selectable reports whether the stack can be told which QUIC congestion
// control to run (more than one choice).
func (c CC) Selectable() bool { return len(c.QUIC) > 1 }

// Metric overrides a test's primary metric for a client (Lighthouse's
// performance score).
type Metric struct {
	Name           string `yaml:"name"`
	Unit           string `yaml:"unit"`
	HigherIsBetter bool   `yaml:"higher_is_better"`
}

// Duration is a time.Duration written as Go writes it ("500ms") in YAML.
type Duration time.Duration

// UnmarshalText parses a duration such as "1.5s".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %s is negative", b)
	}
	*d = Duration(v)
	return nil
}

// Server is a stack's server role.
type Server struct {
	// Protocols it serves (model.Proto* names).
	Protocols []string `yaml:"protocols"`
	// Launch is how `quicbench serve --impl` runs it (Launch* kinds).
	Launch string `yaml:"launch"`
	// Port is the TLS port (TCP and UDP) it listens on in a testbed,
	// distinct per stack so that a testbed can keep one of each running.
	Port int `yaml:"port"`
	// Cannot maps the tests it cannot serve to the reason.
	Cannot map[string]string `yaml:"cannot"`
	// CC says which congestion controls its sockets run.
	CC CC `yaml:"cc"`
	// Stats is where its side's transport statistics come from.
	Stats string `yaml:"stats"`
	// DirSlash: it serves a page's document (written to disk as
	// page/N/S/index.html beside its objects) only at the path with a
	// trailing slash, answering /page/N/S with a redirect: clients ask
	// for /page/N/S/ (workload.Target.DirSlash).
	DirSlash bool `yaml:"dir_slash"`
}

// Client is a stack's client role.
type Client struct {
	// Name is the client's name in plans when it is not the stack's
	// (quicbench's own client is "builtin").
	Name string `yaml:"name"`
	// Kind is how it takes samples (Kind* constants).
	Kind string `yaml:"kind"`
	// Protocols it speaks.
	Protocols []string `yaml:"protocols"`
	// Tests it runs: a fetch or command client's list; empty for a
	// browser (its page and site tests, and the bench page's with Bench)
	// and for quicbench's own (every test).
	Tests []string `yaml:"tests"`
	// Bench: a browser that runs the tests other than page and site in
	// quicbench's bench page.
	Bench bool `yaml:"bench"`
	// ColdOnly, when set, is why it measures cold page loads only.
	ColdOnly string `yaml:"cold_only"`
	// Metric, when set, is its cells' primary metric in place of the
	// test's.
	Metric *Metric `yaml:"metric"`
	// MinTimeout is the shortest per-sample timeout it works with, and
	// MinTimeoutWhy what the time goes to.
	MinTimeout    Duration `yaml:"min_timeout"`
	MinTimeoutWhy string   `yaml:"min_timeout_why"`
	// Overhead is what a sample costs beyond its requests (a program's or
	// a browser's start and teardown), for the estimates.
	Overhead Duration `yaml:"overhead"`
	// Work is the client's own work inside a page load (parsing, layout,
	// paint), for the estimates.
	Work Duration `yaml:"work"`
	// AfterLoad is what the client does after a page's load inside the
	// sample (Lighthouse's quiet windows and audits), for the estimates.
	AfterLoad Duration `yaml:"after_load"`
	// Exclusive, when set, is why its samples run alone in a parallel run
	// (the machine's CPU would bound them).
	Exclusive string `yaml:"exclusive"`
	// CC says which congestion controls its sockets run.
	CC CC `yaml:"cc"`
	// Stats is where its side's transport statistics come from.
	Stats string `yaml:"stats"`
	// Note says, for readers of a report, what its samples include
	// ("the browser's start and teardown included").
	Note string `yaml:"note"`
	// ServeHint, when set, is how a user points the client at a server
	// started by hand: `quicbench serve` prints it with {SPKI} (the
	// certificate's pin) and {ORIGIN} (host:port) filled in.
	ServeHint string `yaml:"serve_hint"`
	// MainProcess, for a browser, tells its main process among its
	// processes (the fault trials kill it).
	MainProcess *MainProcess `yaml:"main_process"`
}

// MainProcess tells a browser's main process: its executable's base name
// contains Exe, and no argument starts with NotArg (which its helper
// processes carry, e.g. Chromium's "--type=").
type MainProcess struct {
	Exe    string `yaml:"exe"`
	NotArg string `yaml:"not_arg"`
}

// Matches reports whether a process with arguments args (args[0] the
// executable) is the browser's main process.
func (m *MainProcess) Matches(args []string) bool {
	if m == nil || len(args) == 0 || !strings.Contains(path.Base(args[0]), m.Exe) {
		return false
	}
	return m.NotArg == "" || !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, m.NotArg) })
}

// Stack describes one implementation.
type Stack struct {
	// Name is the stack's name in plans (server: NAME) and on the
	// command line (serve --impl NAME, fetch --client NAME).
	Name string `yaml:"name"`
	// Label names it for readers ("Caddy", "Chromium").
	Label string `yaml:"label"`
	// QUICLabel, when set, names it for readers in QUIC cells (quicbench's
	// own stack is Go's net/http over TCP and quic-go over QUIC).
	QUICLabel string `yaml:"quic_label"`
	// About is one line on what it is.
	About string `yaml:"about"`
	// Version is the version quicbench pins ("" when it uses whatever the
	// system has, reporting it).
	Version string `yaml:"version"`
	// Packages are the module-relative Go packages beside peers/NAME that
	// implement it and may name it.
	Packages []string `yaml:"packages"`
	// Uses are the stacks it is built on (Lighthouse drives Chromium),
	// which its packages may name too.
	Uses []string `yaml:"uses"`
	// Install says what scripts/setup.sh installs for it.
	Install string `yaml:"install"`
	// KeyLog and Qlog say whether it writes TLS secrets (NSS key log
	// format) and qlog files when asked.
	KeyLog bool `yaml:"keylog"`
	Qlog   bool `yaml:"qlog"`
	// Server and Client are its roles (nil when it has not that role).
	Server *Server `yaml:"server"`
	Client *Client `yaml:"client"`
	// Command is a contract stack's command (LaunchCommand, KindCommand).
	Command string `yaml:"command"`
	// Origin is where the description comes from: "peers/NAME/stack.yaml"
	// for a built-in stack, the declaring file's path for a contract
	// stack.
	Origin string `yaml:"-"`
}

// ClientName returns the name of the stack's client role in plans.
func (s *Stack) ClientName() string {
	if s.Client != nil && s.Client.Name != "" {
		return s.Client.Name
	}
	return s.Name
}

// LabelFor names the stack for readers in a cell of protocol proto.
func (s *Stack) LabelFor(proto string) string {
	if s.QUICLabel != "" && model.IsQUIC(proto) {
		return s.QUICLabel
	}
	return cmp.Or(s.Label, s.Name)
}

// Roles returns the stack's roles, server first.
func (s *Stack) Roles() []string {
	var r []string
	if s.Server != nil {
		r = append(r, RoleServer)
	}
	if s.Client != nil {
		r = append(r, RoleClient)
	}
	return r
}

// IsCommand reports whether the stack is a contract stack, run through a
// command rather than code of quicbench's.
func (s *Stack) IsCommand() bool { return s.Command != "" }

// builtin holds the descriptions of the built-in stacks.
//
//go:embed */stack.yaml
var builtin embed.FS

var (
	mu      sync.RWMutex
	servers map[string]*Stack // by server name
	clients map[string]*Stack // by client name
	order   []*Stack          // built-in stacks, quicbench's own first, then by name
	hooks   = map[string]Hooks{}
)

func init() {
	servers, clients = map[string]*Stack{}, map[string]*Stack{}
	files, err := fs.Glob(builtin, "*/stack.yaml")
	if err != nil {
		panic(err)
	}
	for _, f := range files {
		b, err := builtin.ReadFile(f)
		if err != nil {
			panic(err)
		}
		s, err := Parse(b, "peers/"+f)
		if err != nil {
			panic(err)
		}
		if want := path.Dir(f); s.Name != want {
			panic(fmt.Sprintf("peers/%s: name %q, want the folder's name %q", f, s.Name, want))
		}
		if err := add(s); err != nil {
			panic(err)
		}
	}
	slices.SortFunc(order, func(a, b *Stack) int {
		if (a.Name == Own) != (b.Name == Own) {
			if a.Name == Own {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// Own is the name of quicbench's own stack (its server; its client is
// model.ClientBuiltin).
const Own = model.ServerQuicbench

func add(s *Stack) error {
	if s.Server != nil {
		if o := servers[s.Name]; o != nil {
			return fmt.Errorf("%s: server %q is also declared by %s", s.Origin, s.Name, o.Origin)
		}
		servers[s.Name] = s
	}
	if s.Client != nil {
		if o := clients[s.ClientName()]; o != nil {
			return fmt.Errorf("%s: client %q is also declared by %s", s.Origin, s.ClientName(), o.Origin)
		}
		clients[s.ClientName()] = s
	}
	order = append(order, s)
	return nil
}

// All returns every built-in stack, quicbench's own first, then by name.
func All() []*Stack {
	mu.RLock()
	defer mu.RUnlock()
	return slices.Clone(order)
}

// Lookup returns the stack named name (by its stack name): a built-in
// one, or a contract stack declared in this process (Declare).
func Lookup(name string) (*Stack, bool) {
	mu.RLock()
	defer mu.RUnlock()
	for _, s := range order {
		if s.Name == name {
			return s, true
		}
	}
	s, ok := declared[name]
	return s, ok
}

// ServerStack returns the stack whose server is named name ("" is
// quicbench's own).
func ServerStack(name string) (*Stack, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := servers[cmp.Or(name, Own)]
	return s, ok
}

// ClientStack returns the stack whose client is named name ("" is
// quicbench's own, model.ClientBuiltin).
func ClientStack(name string) (*Stack, bool) {
	mu.RLock()
	defer mu.RUnlock()
	s, ok := clients[cmp.Or(name, model.ClientBuiltin)]
	return s, ok
}

// Servers returns the names of the servers: the built-in ones,
// quicbench's first, then the declared contract stacks', sorted.
func Servers() []string {
	var out []string
	for _, s := range append(All(), declaredStacks()...) {
		if s.Server != nil {
			out = append(out, s.Name)
		}
	}
	return out
}

// Clients returns the names of the clients: the built-in ones,
// quicbench's own (model.ClientBuiltin) first, then the declared contract
// stacks', sorted.
func Clients() []string {
	var out []string
	for _, s := range append(All(), declaredStacks()...) {
		if s.Client != nil {
			out = append(out, s.ClientName())
		}
	}
	return out
}

// declaredStacks returns the declared contract stacks, by name.
func declaredStacks() []*Stack {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]*Stack, 0, len(declared))
	for _, n := range sortedKeys(declared) {
		out = append(out, declared[n])
	}
	return out
}

// IsBrowser reports whether client loads pages in a real browser (a
// browser or an audit client).
func IsBrowser(client string) bool {
	s, ok := ClientStack(client)
	return ok && (s.Client.Kind == KindBrowser || s.Client.Kind == KindAudit)
}

// ServerLabel names the server of a cell (its server name and protocol)
// for readers; an unknown name is returned as it is.
func ServerLabel(server, proto string) string {
	if s, ok := ServerStack(server); ok {
		return s.LabelFor(proto)
	}
	return server
}

// ClientLabel names the client of a cell for readers.
func ClientLabel(client, proto string) string {
	if s, ok := ClientStack(client); ok {
		return s.LabelFor(proto)
	}
	return client
}

// Hooks are the parts of a stack that are code: what finds and checks its
// programs. A stack's Go package provides them at init (Provide).
type Hooks struct {
	// Check finds the stack's programs for role (RoleServer or
	// RoleClient) here and checks that they work, returning the version
	// found ("aioquic 1.7.2") and a detail for doctor (paths). It backs
	// quicbench doctor and the runner's check before a run; it must not
	// start network traffic. An error wraps ErrNotInstalled when the
	// programs are missing.
	Check func(ctx context.Context, role string) (version, detail string, err error)
}

// Provide registers the code hooks of the built-in stack name; its package
// calls it at init.
func Provide(name string, h Hooks) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := hooks[name]; dup {
		panic("peers: hooks for " + name + " provided twice")
	}
	hooks[name] = h
}

type deepKey struct{}

// Deep marks ctx for a thorough check (quicbench doctor's): a stack's
// check may then start its program (a browser in a namespace of its own),
// where the runner's check before a run only looks for it.
func Deep(ctx context.Context) context.Context { return context.WithValue(ctx, deepKey{}, true) }

// IsDeep reports whether ctx asks for a thorough check (Deep).
func IsDeep(ctx context.Context) bool { v, _ := ctx.Value(deepKey{}).(bool); return v }

// ErrNotInstalled is wrapped by the errors of checks that found a stack's
// programs missing.
var ErrNotInstalled = errors.New("peer not installed")

// ErrNotLinked is returned by Check for a stack whose code this program
// was built without (package peers/all links every built-in stack).
var ErrNotLinked = errors.New("the stack's code is not linked into this program")

// Check runs the check of stack s for role: its hook for a built-in stack,
// the command's presence for a contract stack.
func Check(ctx context.Context, s *Stack, role string) (version, detail string, err error) {
	if s.IsCommand() {
		return checkCommand(s)
	}
	mu.RLock()
	h, ok := hooks[s.Name]
	mu.RUnlock()
	if !ok || h.Check == nil {
		if s.Name == Own {
			return "", "built in", nil
		}
		return "", "", fmt.Errorf("%s: %w", s.Name, ErrNotLinked)
	}
	return h.Check(ctx, role)
}

// Tests are the test names of package plan (plan.Test*), repeated here so
// that this package imports nothing above model; a test checks they match.
var Tests = []string{"latency", "ttfb", "handshake", "download", "upload", "multiplex", "stream", "page", "site", "cpu", "fairness"}

// Serves reports whether server can serve test (a plan.Test* name) and,
// when not, why. Unknown servers and tests are errors.
func Serves(server, test string) (ok bool, reason string, err error) {
	s, known := ServerStack(server)
	if !known {
		return false, "", fmt.Errorf("unknown server implementation %q (known: %s)", server, strings.Join(Servers(), ", "))
	}
	return s.Server.serves(test)
}

func (sv *Server) serves(test string) (bool, string, error) {
	if !slices.Contains(Tests, test) {
		return false, "", fmt.Errorf("unknown test %q", test)
	}
	if why, bad := sv.Cannot[test]; bad {
		return false, why, nil
	}
	if test == "fairness" && sv.Launch != LaunchOwn {
		return false, fairnessWhy, nil
	}
	return true, "", nil
}

// fairnessWhy is why no server but quicbench's serves the fairness test.
const fairnessWhy = "the fairness test's flows are quicbench's own bulk transfers between the namespaces, not requests to a server"

// ServedTests returns the tests server can serve, in Tests' order.
func ServedTests(server string) []string {
	var out []string
	for _, t := range Tests {
		if ok, _, _ := Serves(server, t); ok {
			out = append(out, t)
		}
	}
	return out
}

// Protocols returns the protocols server serves, or nil for an unknown
// server.
func Protocols(server string) []string {
	if s, ok := ServerStack(server); ok {
		return slices.Clone(s.Server.Protocols)
	}
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// List joins names for a sentence: "h1", "h1 and h2", "h1, h2 and h3".
func List(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
