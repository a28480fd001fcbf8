package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// defaultServers reports whether a plan's server list is the default one
// (quicbench's own server only).
func defaultServers(s []string) bool {
	return len(s) == 0 || (len(s) == 1 && s[0] == model.ServerQuicbench)
}

// serverUnsupported says why a server cannot serve a test ("" if it can):
// package peers knows what each implementation serves (Caddy, serving files
// from disk, has no /upload or /stream).
func serverUnsupported(t *testDef, server string) string {
	ok, why, err := peers.Serves(server, t.name)
	switch {
	case err != nil:
		return err.Error()
	case !ok:
		return fmt.Sprintf("the %s server cannot serve the %s test: %s", server, t.name, why)
	}
	return ""
}

// serverProtoUnsupported says why a server cannot serve a protocol.
func serverProtoUnsupported(p, server string) string {
	served := peers.Protocols(server)
	if slices.Contains(served, p) {
		return ""
	}
	return fmt.Sprintf("the %s server speaks only %s, not %s", server, strings.Join(served, ", "), p)
}
