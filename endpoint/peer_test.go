package endpoint

import (
	"context"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/peers"
)

// TestPeerBadInput checks the errors of bad peer configurations.
func TestPeerBadInput(t *testing.T) {
	for _, c := range []struct {
		cfg  PeerConfig
		want string
	}{
		{PeerConfig{Impl: "nosuch"}, "not \"nosuch\""},
		{PeerConfig{Impl: peers.Own}, "not \"quicbench\""},
	} {
		if _, err := StartPeer(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
	for _, path := range []string{"/upload", "/bytes/x", "/page/1", "/bytes/../../etc", "bytes/1"} {
		if err := Materialize(t.TempDir(), []string{path}); err == nil {
			t.Errorf("Materialize(%q) succeeded", path)
		}
	}
}
