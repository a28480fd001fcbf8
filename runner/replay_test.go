package runner

import (
	"slices"
	"testing"

	"github.com/quicbench/quicbench/workload"
)

// A replayed page's capture counts the flows to its origins' ports beside
// the server's own; other samples keep the server's ports only.
func TestReplayCapturePorts(t *testing.T) {
	if got := replayCapturePorts(capturePorts(4433, 8080), nil).ports; !slices.Equal(got, []uint16{4433, 8080}) {
		t.Errorf("without a replay: %v", got)
	}
	rp := &workload.Replay{Origins: []string{"www.news.example:443", "cdn.example:443", "api.example:8443", "[::1]:4433", "bad"}}
	if got := replayCapturePorts(capturePorts(4433, 8080), rp).ports; !slices.Equal(got, []uint16{4433, 8080, 443, 8443}) {
		t.Errorf("with a replay: %v, want the server's ports, then 443 and 8443 once each", got)
	}
}
