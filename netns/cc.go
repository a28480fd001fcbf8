package netns

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// CCControl returns a Control function for net.Dialer and net.ListenConfig
// that selects congestion control cc on every TCP socket (TCP_CONGESTION;
// accepted connections inherit it from their listener). Endpoints use it so
// that the algorithm under test applies even where a namespace cannot
// default to it. Other sockets are left alone.
func CCControl(cc string) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		if !strings.HasPrefix(network, "tcp") || cc == "" {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
		})
		if err == nil && serr != nil {
			err = fmt.Errorf("setsockopt TCP_CONGESTION %q: %w", cc, serr)
		}
		return err
	}
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
