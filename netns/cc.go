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

// RestrictedCCHint explains, for a user, why the namespaces default to
// DefaultCC instead of CC, or returns "" when they match.
func (t *Testbed) RestrictedCCHint() string {
	if t.defaultCC == t.cc {
		return ""
	}
	allowed, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	return fmt.Sprintf("the host lets network namespaces default only to %q (net.ipv4.tcp_allowed_congestion_control), so "+
		"new TCP sockets in the testbed use %s unless they select %s themselves (quicbench's endpoints do; e.g. iperf3 -C %s). "+
		"To make %s the namespace default, allow it host-wide: sysctl -w net.ipv4.tcp_allowed_congestion_control=\"%s %s\"",
		strings.TrimSpace(string(allowed)), t.defaultCC, t.cc, t.cc, t.cc, strings.TrimSpace(string(allowed)), t.cc)
}
