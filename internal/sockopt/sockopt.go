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
