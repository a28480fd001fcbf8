//go:build qbinvestigate

package h3

import (
	"os"
	_ "unsafe" // for go:linkname
)

// An investigation build (go build -tags qbinvestigate) for issue 31
// (docs/peers.md, "Firefox"): with QUICBENCH_NO_KEY_UPDATE=1 in its
// environment, quic-go's first key update, which it starts after its first
// 100 packets (handshake.FirstKeyUpdateInterval, not configurable), is put
// off beyond any test's length, so that the same server can be measured
// with and without it. Never part of a normal build: it reaches into
// quic-go's internals by name.
//
//go:linkname firstKeyUpdateInterval github.com/quic-go/quic-go/internal/handshake.FirstKeyUpdateInterval
var firstKeyUpdateInterval uint64

func init() {
	if os.Getenv("QUICBENCH_NO_KEY_UPDATE") == "1" {
		firstKeyUpdateInterval = 1 << 40
	}
}
