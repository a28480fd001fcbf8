package peers

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/quicbench/quicbench/model"
)

// nameRE is what a stack's name (and a client's) may be: it becomes part
// of cell keys, file names and command lines.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// Parse decodes and validates one stack description (the YAML of a
// peers/NAME/stack.yaml); origin names it in errors.
func Parse(b []byte, origin string) (*Stack, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var s Stack
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty stack description", origin)
		}
		return nil, fmt.Errorf("%s: %w", origin, err)
	}
	s.Origin = origin
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks a description: names, roles, kinds, protocols, tests
// and congestion controls, each against what quicbench knows.
func (s *Stack) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if !nameRE.MatchString(s.Name) {
		bad("name %q: want a lower-case letter, then up to 31 lower-case letters, digits and dashes", s.Name)
	}
	if s.Name == model.ClientBuiltin {
		bad("name %q is quicbench's own client's", s.Name)
	}
	if s.Server == nil && s.Client == nil {
		bad("no role: give it a server or a client (or both)")
	}
	protos := func(role string, ps []string) {
		if len(ps) == 0 {
			bad("%s.protocols: empty", role)
		}
		for _, p := range ps {
			if !slices.Contains(model.Protocols, p) {
				bad("%s.protocols: unknown protocol %q (known: %s)", role, p, strings.Join(model.Protocols, ", "))
			}
		}
	}
	ccs := func(role string, c CC, ps []string) {
		tcp := slices.ContainsFunc(ps, func(p string) bool { return !model.IsQUIC(p) })
		quic := slices.ContainsFunc(ps, model.IsQUIC)
		switch {
		case c.TCP != "" && c.TCP != TCPKernel:
			bad("%s.cc.tcp: %q, want %q (the testbed's, which its routes impose) or nothing", role, c.TCP, TCPKernel)
		case tcp && c.TCP == "":
			bad("%s.cc.tcp: the stack speaks TCP: say %q", role, TCPKernel)
		}
		for _, a := range c.QUIC {
			if !slices.Contains(model.CongestionControls, a) {
				bad("%s.cc.quic: unknown algorithm %q (known: %s)", role, a, strings.Join(model.CongestionControls, ", "))
			}
		}
		switch {
		case s.Command != "" && len(c.QUIC) == 0:
			// a contract stack's congestion control is its own, unknown
		case quic && len(c.QUIC) == 0:
			bad("%s.cc.quic: the stack speaks QUIC: list what it runs (one algorithm when it cannot choose)", role)
		case len(c.QUIC) > 0 && !slices.Contains(c.QUIC, c.QUICDefault):
			bad("%s.cc.quic_default: %q is not one of %v", role, c.QUICDefault, c.QUIC)
		case !quic && len(c.QUIC) > 0:
			bad("%s.cc.quic: the stack speaks no QUIC", role)
		}
	}
	tests := func(field string, ts []string) {
		for _, t := range ts {
			if !slices.Contains(Tests, t) {
				bad("%s: unknown test %q", field, t)
			}
		}
	}
	if sv := s.Server; sv != nil {
		protos("server", sv.Protocols)
		ccs("server", sv.CC, sv.Protocols)
		switch sv.Launch {
		case LaunchOwn, LaunchProgram, LaunchFiles:
		case LaunchCommand:
			if s.Command == "" {
				bad("server.launch %q needs a command", sv.Launch)
			}
		default:
			bad("server.launch: %q, want %s, %s, %s or %s", sv.Launch, LaunchOwn, LaunchProgram, LaunchFiles, LaunchCommand)
		}
		if sv.Port < 1 || sv.Port > 65535 {
			bad("server.port: %d, want 1..65535", sv.Port)
		}
		tests("server.cannot", sortedKeys(sv.Cannot))
		for t, why := range sv.Cannot {
			if strings.TrimSpace(why) == "" {
				bad("server.cannot.%s: say why", t)
			}
		}
	}
	if c := s.Client; c != nil {
		if c.Name != "" && !nameRE.MatchString(c.Name) {
			bad("client.name %q: want a lower-case name", c.Name)
		}
		protos("client", c.Protocols)
		ccs("client", c.CC, c.Protocols)
		tests("client.tests", c.Tests)
		switch c.Kind {
		case KindBuiltin:
		case KindFetch, KindCommand:
			if len(c.Tests) == 0 {
				bad("client.tests: a %s client lists the tests it runs", c.Kind)
			}
			if c.Kind == KindCommand && s.Command == "" {
				bad("client.kind %q needs a command", c.Kind)
			}
		case KindBrowser, KindAudit:
			if len(c.Tests) > 0 {
				bad("client.tests: a %s client runs the page and site tests (and the bench page's with bench): list none", c.Kind)
			}
		default:
			bad("client.kind: %q, want %s, %s, %s, %s or %s", c.Kind, KindBuiltin, KindFetch, KindBrowser, KindAudit, KindCommand)
		}
		if c.Bench && c.Kind != KindBrowser {
			bad("client.bench: only a browser runs the bench page")
		}
		if m := c.Metric; m != nil && (m.Name == "" || m.Unit == "") {
			bad("client.metric: give its name and unit")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %s", s.Origin, strings.Join(errs, "; "))
	}
	return nil
}
