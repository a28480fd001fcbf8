// Package quinn is the quinn stack (stack.yaml beside this file): QUIC in
// pure Rust (quinn) with h3, h3-quinn and rustls, as the server and client
// programs of the Rust crate in this folder (qb-quinn, built by
// scripts/setup.sh through install.sh), which speak the peer program
// protocol (docs/peers.md) through the workspace's shared crate qbpeer.
package quinn

import "github.com/quicbench/quicbench/peers/program"

// Name is the stack's name in the registry.
const Name = "quinn"

func init() {
	program.Native{Name: Name, Server: "qb-quinn-server", Client: "qb-quinn-client"}.Register()
}
