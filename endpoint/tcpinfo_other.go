//go:build !linux

package endpoint

import (
	"errors"
	"net"
	"syscall"

	"github.com/quicbench/quicbench/model"
)

func tcpStats(*net.TCPConn) (model.TransportStats, error) {
	return model.TransportStats{}, errors.New("TCP_INFO is only read on Linux")
}

func setCongestion(name string) func(string, string, syscall.RawConn) error {
	if name == "" {
		return nil
	}
	return func(string, string, syscall.RawConn) error {
		return errors.New("setting the TCP congestion control is only supported on Linux")
	}
}
