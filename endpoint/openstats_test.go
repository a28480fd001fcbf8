package endpoint_test

import (
	"context"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/peertest"
)

// TestServerReadsOpenQUICConnection: quicbench's own server reads a QUIC
// connection whose client has not closed it when a wait for its end gives
// up (peertest.OpenConnectionStats), as when the link lost the close.
func TestServerReadsOpenQUICConnection(t *testing.T) {
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	peertest.OpenConnectionStats(t, srv, srv.Info(), "reno")
}
