package sockopt

import (
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

func congestionControl(name string) Control {
	return func(network, _ string, c syscall.RawConn) error {
		if !strings.HasPrefix(network, "tcp") {
			return nil
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name)
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("TCP congestion control %q: %w (see /proc/sys/net/ipv4/tcp_available_congestion_control)", name, err)
		}
		return nil
	}
}

func congestionOf(c syscall.Conn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var name string
	var serr error
	if err := rc.Control(func(fd uintptr) {
		name, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	}); err != nil {
		return "", err
	}
	return strings.TrimRight(name, "\x00"), serr
}
