package runner

import (
	"context"
	"fmt"
	"slices"

	"github.com/quicbench/quicbench/peers"
)

// checkPeers makes sure, before any testbed is built, that the stacks the
// plan's cells need besides quicbench's own are installed here and work,
// each by its check in the registry (the checks quicbench doctor runs). A
// run that would otherwise stop at the first such cell, hours in, stops at
// once and says what to install. It records the version of each client
// program that takes samples without a browser (the servers' are recorded
// when they start, from their hello; the browsers' by recordBrowser).
func (r *run) checkPeers(ctx context.Context) error {
	type use struct {
		st   *peers.Stack
		role string
	}
	var uses []use
	add := func(st *peers.Stack, role string) {
		if st.Name != peers.Own && !slices.Contains(uses, use{st, role}) {
			uses = append(uses, use{st, role})
		}
	}
	for _, c := range r.cells {
		if st, ok := peers.ServerStack(c.ServerImpl()); ok {
			add(st, peers.RoleServer)
		}
		if st, ok := peers.ClientStack(c.Client); ok {
			add(st, peers.RoleClient)
		}
	}
	for _, u := range uses {
		v, _, err := peers.Check(ctx, u.st, u.role)
		if err != nil {
			return fmt.Errorf("the plan's cells need the %s %s, which is not usable here: %w (quicbench doctor checks it)", u.st.Name, u.role, err)
		}
		if u.role == peers.RoleClient && !peers.IsBrowser(u.st.ClientName()) && v != "" {
			if err := r.db.SetRunPeer(context.WithoutCancel(ctx), r.runRec.ID, u.st.ClientName()+" client", v); err != nil {
				return err
			}
		}
	}
	return nil
}

// serverPort is the TLS port of a server implementation in a testbed:
// its stack's, distinct per stack so that a slot can keep one of each
// running (slot.parked).
func serverPort(impl string) int {
	if st, ok := peers.ServerStack(impl); ok {
		return st.Server.Port
	}
	return 0
}

// servesFiles reports whether a server serves files written before it
// starts (a server of files, or a contract stack's from /www), so that the
// runner passes it the paths its cells request.
func servesFiles(impl string) bool {
	st, ok := peers.ServerStack(impl)
	return ok && (st.Server.Launch == peers.LaunchFiles || st.Server.Launch == peers.LaunchCommand)
}

// dirSlash reports whether a server answers a page's document only at its
// path with a trailing slash (its stack's dir_slash).
func dirSlash(impl string) bool {
	st, ok := peers.ServerStack(impl)
	return ok && st.Server.DirSlash
}
