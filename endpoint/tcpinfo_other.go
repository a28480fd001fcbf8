//go:build !linux

package endpoint

import (
	"errors"
	"net"

	"github.com/quicbench/quicbench/model"
)

func tcpStats(*net.TCPConn) (model.TransportStats, error) {
	return model.TransportStats{}, errors.New("TCP_INFO is only read on Linux")
}
