package peers_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// TestTestsAreThePlanTests checks that the registry knows every test of
// package plan and no other, so that a new test cannot go unclassified.
func TestTestsAreThePlanTests(t *testing.T) {
	if !sameSet(peers.Tests, plan.Tests()) {
		t.Fatalf("peers.Tests %v, plan tests %v", peers.Tests, plan.Tests())
	}
	if got := peers.ServedTests(peers.Own); !sameSet(got, plan.Tests()) {
		t.Errorf("quicbench serves %v, want every plan test %v", got, plan.Tests())
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestBuiltinStacks checks the descriptions every build embeds: quicbench's
// own first and its names the model's, distinct ports, the stacks they use
// known, the packages they name present in the module, and every peer
// server's tests that it cannot serve said why.
func TestBuiltinStacks(t *testing.T) {
	all := peers.All()
	if len(all) < 6 || all[0].Name != peers.Own || all[0].ClientName() != model.ClientBuiltin {
		t.Fatalf("stacks %v: want quicbench's own first and at least six", names(all))
	}
	ports := map[int]string{}
	for _, s := range all {
		if s.Origin != "peers/"+s.Name+"/stack.yaml" {
			t.Errorf("%s: origin %q", s.Name, s.Origin)
		}
		if s.Server != nil {
			if o, dup := ports[s.Server.Port]; dup {
				t.Errorf("%s and %s both listen on port %d", s.Name, o, s.Server.Port)
			}
			ports[s.Server.Port] = s.Name
		}
		for _, u := range s.Uses {
			if _, ok := peers.Lookup(u); !ok {
				t.Errorf("%s uses unknown stack %q", s.Name, u)
			}
		}
		for _, p := range s.Packages {
			if fi, err := os.Stat(filepath.Join("..", p)); err != nil || !fi.IsDir() {
				t.Errorf("%s: package %s is not a folder of the module: %v", s.Name, p, err)
			}
		}
		if s.Label == "" || s.About == "" || s.Install == "" {
			t.Errorf("%s: label, about and install must say something", s.Name)
		}
	}
	for _, c := range []struct {
		server, test string
		ok           bool
	}{
		{"aioquic", "upload", true},
		{"aioquic", "stream", true},
		{"aioquic", "site", true},
		{"aioquic", "fairness", false},
		{"caddy", "site", true},
		{"caddy", "download", true},
		{"caddy", "upload", false},
		{"caddy", "stream", false},
		{peers.Own, "fairness", true},
	} {
		ok, why, err := peers.Serves(c.server, c.test)
		if err != nil || ok != c.ok || (!ok && why == "") {
			t.Errorf("Serves(%s, %s) = %v, %q, %v; want %v with a reason when false", c.server, c.test, ok, why, err, c.ok)
		}
	}
	if _, _, err := peers.Serves("nosuch", "download"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("unknown server: %v", err)
	}
	if _, _, err := peers.Serves("caddy", "nosuch"); err == nil {
		t.Error("unknown test accepted")
	}
	if got := peers.Protocols("caddy"); strings.Join(got, ",") != "h1,h2,h3" {
		t.Errorf("caddy protocols %v", got)
	}
	if peers.Protocols("nosuch") != nil {
		t.Error("protocols of an unknown server")
	}
	if !peers.IsBrowser("firefox") || !peers.IsBrowser("lighthouse") || peers.IsBrowser("aioquic") || peers.IsBrowser(model.ClientBuiltin) {
		t.Error("IsBrowser")
	}
	if got := peers.ServerLabel(peers.Own, model.ProtoH3) + "/" + peers.ServerLabel("", model.ProtoH2) + "/" + peers.ClientLabel("unknown", "h3"); got != "quic-go/Go net/http/unknown" {
		t.Errorf("labels %q", got)
	}
}

func names(ss []*peers.Stack) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// TestQUICFor: a stack runs the plan's congestion control over QUIC when it
// can, else its own, and says which.
func TestQUICFor(t *testing.T) {
	own, _ := peers.ServerStack(peers.Own)
	if a, m := own.Server.CC.QUICFor("cubic"); a != "reno" || m {
		t.Errorf("quic-go asked cubic: %s, matched %v", a, m)
	}
	if a, m := own.Server.CC.QUICFor("reno"); a != "reno" || !m {
		t.Errorf("quic-go asked reno: %s, matched %v", a, m)
	}
	aio, _ := peers.ServerStack("aioquic")
	if a, m := aio.Server.CC.QUICFor("reno"); a != "reno" || !m || !aio.Server.CC.Selectable() {
		t.Errorf("aioquic asked reno: %s, matched %v", a, m)
	}
	if a, m := aio.Server.CC.QUICFor("bbr"); a != "cubic" || m {
		t.Errorf("aioquic asked bbr: %s, matched %v", a, m)
	}
}

// TestParseErrors: a description that is wrong says what and where.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{``, "empty stack description"},
		{`name: x`, "no role"},
		{`name: X
client: {kind: fetch, protocols: [h3], tests: [download], cc: {quic: [cubic], quic_default: cubic}}`, `name "X"`},
		{`name: builtin
client: {kind: builtin, protocols: [h1], cc: {tcp: kernel}}`, "quicbench's own client's"},
		{`name: x
nosuch: 1`, "field nosuch not found"},
		{`name: x
server: {launch: program, port: 4500, protocols: [h4], cc: {quic: [cubic], quic_default: cubic}}`, `unknown protocol "h4"`},
		{`name: x
server: {launch: program, port: 4500, protocols: [h3]}`, "the stack speaks QUIC"},
		{`name: x
server: {launch: files, port: 4500, protocols: [h2]}`, `say "kernel"`},
		{`name: x
server: {launch: program, port: 4500, protocols: [h3], cc: {quic: [cubic, vegas], quic_default: cubic}}`, `unknown algorithm "vegas"`},
		{`name: x
server: {launch: program, port: 4500, protocols: [h3], cc: {quic: [cubic], quic_default: reno}}`, `quic_default: "reno" is not one of`},
		{`name: x
server: {launch: teleport, port: 0, protocols: [h2], cc: {tcp: kernel}}`, `server.launch: "teleport"`},
		{`name: x
server: {launch: files, port: 0, protocols: [h2], cc: {tcp: kernel}}`, "server.port: 0"},
		{`name: x
server: {launch: files, port: 4500, protocols: [h2], cc: {tcp: kernel}, cannot: {upload: ""}}`, "server.cannot.upload: say why"},
		{`name: x
server: {launch: files, port: 4500, protocols: [h2], cc: {tcp: kernel}, cannot: {teleport: "no"}}`, `unknown test "teleport"`},
		{`name: x
server: {launch: command, port: 4500, protocols: [h3], cc: {quic: [cubic], quic_default: cubic}}`, "needs a command"},
		{`name: x
client: {kind: fetch, protocols: [h3], cc: {quic: [cubic], quic_default: cubic}}`, "lists the tests it runs"},
		{`name: x
client: {kind: browser, bench: true, protocols: [h2], tests: [page], cc: {tcp: kernel}}`, "list none"},
		{`name: x
client: {kind: fetch, bench: true, protocols: [h2], tests: [download], cc: {tcp: kernel}}`, "only a browser runs the bench page"},
		{`name: x
client: {kind: fetch, protocols: [h2], tests: [download], cc: {tcp: kernel}, overhead: -1s}`, "negative"},
	} {
		_, err := peers.Parse([]byte(c.yaml), "x/stack.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "x/stack.yaml: ") {
			t.Errorf("%q: error %v, want one naming the file and containing %q", c.yaml, err, c.want)
		}
	}
}

func TestList(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"a", "b"}, "a and b"}, {[]string{"a", "b", "c"}, "a, b and c"}} {
		if got := peers.List(c.in); got != c.want {
			t.Errorf("List(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
