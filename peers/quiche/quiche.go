// Package quiche is the quiche stack (stack.yaml beside this file):
// Cloudflare's QUIC and HTTP/3 in Rust, as the server and client programs
// of the Rust crate in this folder (qb-quiche, built by scripts/setup.sh
// through install.sh), which pace their sending as quiche asks and speak
// the peer program protocol (docs/peers.md) through the workspace's shared
// crate qbpeer.
package quiche

import "github.com/quicbench/quicbench/peers/program"

// Name is the stack's name in the registry.
const Name = "quiche"

func init() {
	program.Native{Name: Name, Server: "qb-quiche-server", Client: "qb-quiche-client"}.Register()
}
