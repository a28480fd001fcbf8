package netns

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/quicbench/quicbench/internal/sockopt"
)

// CCControl returns a Control function for net.Dialer and net.ListenConfig
// that selects congestion control cc on every TCP socket (TCP_CONGESTION;
// accepted connections inherit it from their listener), so that the
// algorithm under test applies even where a namespace cannot default to it.
// Other sockets are left alone; an empty cc gives nil, which sets nothing.
// It is the setter the endpoints use (sockopt.CongestionControl).
func CCControl(cc string) func(network, address string, c syscall.RawConn) error {
	return sockopt.CongestionControl(cc)
}

// RestrictedCCHint explains, for a user, that the namespaces default to
// DefaultCC instead of CC and what that means, or returns "" when they
// match.
func (t *Testbed) RestrictedCCHint() string {
	cc, def := t.CC(), t.DefaultCC()
	if def == cc {
		return ""
	}
	allowed, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	return fmt.Sprintf("the host lets network namespaces default only to %q (net.ipv4.tcp_allowed_congestion_control), so the namespaces' default stays %s; "+
		"the testbed's routes carry %s (ip route ... congctl %s), so every TCP connection between the client and the server namespace runs %s "+
		"whatever its program asks for; only connections inside one namespace (loopback) get %s",
		strings.TrimSpace(string(allowed)), def, cc, cc, cc, def)
}
