package quiche_test

import (
	"testing"

	"github.com/quicbench/quicbench/cli/clitest"
	"github.com/quicbench/quicbench/peers/quiche"
)

// TestServerSendsQuicbenchContent runs quiche's server on the loopback
// interface under Cubic and NewReno: quicbench's bodies byte for byte, its
// TLS secrets written (clitest.ServerSendsQuicbenchContent; its
// connections' statistics: TestRunAcrossTestbed).
func TestServerSendsQuicbenchContent(t *testing.T) {
	clitest.ServerSendsQuicbenchContent(t, quiche.Name, "cubic", "reno")
}

// TestClientFetchesFromQuicbench runs quiche's client against quicbench's own
// server on the loopback interface: a valid download under NewReno.
func TestClientFetchesFromQuicbench(t *testing.T) {
	clitest.ClientFetchesFromQuicbench(t, quiche.Name, "reno")
}
