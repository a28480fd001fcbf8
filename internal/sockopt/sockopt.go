// Package sockopt sets the socket options that quicbench's endpoints and
// testbed share, through the Control hook of net.Dialer and
// net.ListenConfig.
package sockopt

import "syscall"

// Control is the type of net.Dialer.Control and net.ListenConfig.Control.
type Control = func(network, address string, c syscall.RawConn) error

// CongestionControl returns a Control function that sets the TCP congestion
// control algorithm name (TCP_CONGESTION) of every TCP socket before it
// connects or listens; accepted sockets inherit it from their listener.
// Other sockets are left alone. An empty name keeps the system default (the
// result is then nil). Setting it is supported on Linux only; elsewhere the
// returned function fails.
func CongestionControl(name string) Control {
	if name == "" {
		return nil
	}
	return congestionControl(name)
}

// CongestionOf returns the TCP congestion control algorithm a connected
// TCP socket runs (TCP_CONGESTION): the one it chose, or the one its route
// imposed when it connected. Supported on Linux only.
func CongestionOf(c syscall.Conn) (string, error) { return congestionOf(c) }
