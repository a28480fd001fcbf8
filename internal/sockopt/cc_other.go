//go:build !linux

package sockopt

import (
	"errors"
	"syscall"
)

func congestionControl(string) Control {
	return func(string, string, syscall.RawConn) error {
		return errors.New("setting the TCP congestion control is only supported on Linux")
	}
}

func congestionOf(syscall.Conn) (string, error) {
	return "", errors.New("reading the TCP congestion control is only supported on Linux")
}
