package caddy_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/peertest"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers/caddy"
)

func requireCaddy(t *testing.T) {
	t.Helper()
	if _, _, err := caddy.Find(context.Background()); err != nil {
		testsupport.Unavailable(t, "%v", err)
	}
}

// TestServesQuicbenchContent runs Caddy on the loopback interface and
// checks that it sends the same page, objects and /bytes bodies as
// quicbench's own server over h1, h2 and h3, what its hello says, and that
// Close removes its files.
func TestServesQuicbenchContent(t *testing.T) {
	requireCaddy(t)
	p, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: caddy.Name, Host: "127.0.0.1",
		Paths: []string{"/page/4/100-3KB", "/bytes/300000"}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	info := p.Info()
	if info.Impl != caddy.Name || !strings.HasPrefix(info.Version, "caddy ") || strings.Join(info.Protocols, ",") != "h1,h2,h3" ||
		info.Settings["quic_cc"] != "reno (quic-go's, not selectable)" {
		t.Fatalf("hello %+v", info)
	}
	base := "https://127.0.0.1:" + strconv.Itoa(info.Port)
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoH3} {
		peertest.SameContent(t, peertest.LoopbackClient(t, info, proto), base, proto)
	}
	if _, err := p.ConnStats(context.Background(), "tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "caddy") {
		t.Fatalf("caddy statistics: %v", err)
	}
	dir := p.Dir()
	p.Close()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("caddy's scratch directory %s remains: %v", dir, err)
	}
}

// TestRefusesWhatItCannotDo: Caddy writes no qlog or key log.
func TestRefusesWhatItCannotDo(t *testing.T) {
	_, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: caddy.Name, QlogDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "caddy writes no qlog") {
		t.Fatalf("error %v", err)
	}
}
