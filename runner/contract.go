package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/peers/contract"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// Contract stacks (docs/plan-format.md, "Stacks of your own"): a plan may
// declare stacks that run through a command with the quic-interop-runner's
// endpoint contract. Their commands are code: the run refuses them unless
// the user allows them; a testcase a stack does not support (its command
// exits 127) skips its cells with a note; a contract client's samples are
// timed on the wire.

// checkCommands refuses a plan that declares contract stacks unless the
// user allowed their commands, naming every command it would run.
func (r *run) checkCommands() error {
	cmds := peers.Commands(r.plan.Stacks())
	if len(cmds) == 0 || r.opts.AllowCommands {
		return nil
	}
	return fmt.Errorf("the plan declares stacks whose commands the run would execute, as root:\n  %s\nrun it with --allow-commands if you trust them (quicbench plans validate lists a plan's commands)",
		strings.Join(cmds, "\n  "))
}

// usesContracts reports whether a contract client takes any of the run's
// samples (they need the wire timing).
func usesContractClients(cells []model.Cell) bool {
	for _, c := range cells {
		if st, ok := peers.ClientStack(c.Client); ok && st.Client.Kind == peers.KindCommand {
			return true
		}
	}
	return false
}

// unsupportedCells probes every contract stack, role and testcase the
// run's cells use (contract.Probe: in an empty network namespace) and
// returns the cells of those it does not support (exit 127), with why. A
// probe that fails to run ends the run.
func (r *run) unsupportedCells(ctx context.Context) (map[int64]string, error) {
	type use struct{ stack, role, testcase string }
	verdict := map[use]string{}
	out := map[int64]string{}
	for _, c := range r.cells {
		var uses []use
		if st, ok := peers.ServerStack(c.ServerImpl()); ok && st.IsCommand() {
			uses = append(uses, use{st.Name, peers.RoleServer, peers.Testcase(c.Protocol)})
		}
		if st, ok := peers.ClientStack(c.Client); ok && st.IsCommand() {
			uses = append(uses, use{st.Name, peers.RoleClient, peers.Testcase(c.Protocol)})
		}
		for _, u := range uses {
			why, seen := verdict[u]
			if !seen {
				st, _ := peers.Lookup(u.stack)
				ok, err := contract.Probe(ctx, r.opts.Exe, st, u.role, u.testcase)
				if err != nil {
					return nil, fmt.Errorf("probing contract stack %s as %s: %w", u.stack, u.role, err)
				}
				if !ok {
					why = fmt.Sprintf("%s does not support testcase %s as %s (its command exits 127)", u.stack, u.testcase, u.role)
				}
				verdict[u] = why
			}
			if why != "" {
				out[c.ID] = why
			}
		}
	}
	return out, nil
}

// contractArgs are the serve arguments of a contract stack's server: its
// declaration, for the server process to declare it too.
func contractArgs(impl string) ([]string, error) {
	st, ok := peers.ServerStack(impl)
	if !ok || !st.IsCommand() {
		return nil, nil
	}
	b, err := json.Marshal(declOf(st))
	if err != nil {
		return nil, err
	}
	return []string{"--contract", string(b)}, nil
}

// declOf is a contract stack's declaration (its command absolute).
func declOf(st *peers.Stack) *peers.ContractDecl {
	d := &peers.ContractDecl{Name: st.Name, Command: st.Command, Roles: st.Roles()}
	if st.Server != nil {
		d.Protocols = st.Server.Protocols
	} else {
		d.Protocols = st.Client.Protocols
	}
	return d
}

// clientDecl is the declaration a request carries when its client is a
// contract stack (nil otherwise).
func clientDecl(client string) *workload.ContractDecl {
	st, ok := peers.ClientStack(client)
	if !ok || !st.IsCommand() {
		return nil
	}
	return declOf(st)
}

// wireMetrics gives a contract client's sample its primary metric from
// what the emulator saw (sc.wire): a download's goodput over the body's
// bytes, a first byte's time, and a page's or a multiplex's span from the
// client's first packet to the last data packet's arrival (the handshake
// included). A sample the wire showed no response of is invalid.
func wireMetrics(c *model.Cell, s *model.Sample, sc *sampleCapture, bytes int64) {
	if s.Status != model.StatusOK {
		return
	}
	if sc == nil || !sc.wireOK || !sc.wire.Valid {
		s.Status, s.Error = model.StatusInvalid, "a contract client's sample is timed on the wire, and the emulator saw no response"
		return
	}
	w := sc.wire
	span := float64(w.LastData-w.FirstClient) / 1e6
	switch c.Test {
	case plan.TestDownload:
		if v, ok := w.GoodputOf(bytes); ok {
			s.Metrics["goodput_mbps"] = v
		}
	case plan.TestTTFB:
		if v, ok := w.TTFB(); ok {
			s.Metrics["ttfb_ms"] = v
		}
	case plan.TestMultiplex:
		s.Metrics["span_ms"] = span
	case plan.TestPage:
		s.Metrics["plt_ms"] = span
	}
}

// isCommandServer reports whether impl is a contract stack's server.
func isCommandServer(impl string) bool {
	st, ok := peers.ServerStack(impl)
	return ok && st.IsCommand()
}
