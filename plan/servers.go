package plan

import (
	"fmt"
	"slices"

	"github.com/quicbench/quicbench/model"
)

// defaultServers reports whether a plan's server list is the default one
// (quicbench's own server only).
func defaultServers(s []string) bool {
	return len(s) == 0 || (len(s) == 1 && s[0] == model.ServerQuicbench)
}

// ServerProtocols returns the protocols a server implementation serves, in
// model.Protocols order (nil for an unknown server).
func ServerProtocols(server string) []string {
	switch server {
	case model.ServerQuicbench:
		return slices.Clone(model.Protocols)
	case model.ServerAioquic:
		return []string{model.ProtoH3}
	case model.ServerCaddy:
		return []string{model.ProtoH1, model.ProtoH2, model.ProtoH3}
	}
	return nil
}

// serverUnsupported says why a server cannot serve a test ("" if it can).
// Caddy serves files from disk: the resources that compute an answer
// (/upload reads and counts a body, /stream paces its segments) have no
// file to be.
func serverUnsupported(t *testDef, server string) string {
	if server == model.ServerCaddy {
		switch t.name {
		case TestUpload, TestStream:
			return fmt.Sprintf("the caddy server serves files from disk, which the %s test's resource is not (it needs quicbench's or aioquic's server)", t.name)
		}
	}
	return ""
}

// serverProtoUnsupported says why a server cannot serve a protocol.
func serverProtoUnsupported(p, server string) string {
	if slices.Contains(ServerProtocols(server), p) {
		return ""
	}
	switch server {
	case model.ServerAioquic:
		return fmt.Sprintf("the aioquic server speaks only h3, not %s", p)
	case model.ServerCaddy:
		return fmt.Sprintf("the caddy server speaks h1, h2 and h3, not %s", p)
	}
	return fmt.Sprintf("unknown server %q", server)
}
