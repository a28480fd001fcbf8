package nginx_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/peertest"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers/nginx"
)

// TestServesQuicbenchContent runs nginx on the loopback interface: over h1
// and h2 it sends quicbench's page, objects and /bytes bodies byte for
// byte, uncacheable, and a site from its directory; Close leaves no
// process and no files.
func TestServesQuicbenchContent(t *testing.T) {
	if _, _, err := nginx.Find(context.Background()); err != nil {
		testsupport.Unavailable(t, "%v", err)
	}
	site := t.TempDir()
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte("<p>hello</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: nginx.Name, Host: "127.0.0.1",
		Paths: []string{"/page/4/100-3KB", "/bytes/300000"}, Sites: map[string]string{"demo": site}, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	info := p.Info()
	if info.Impl != nginx.Name || !strings.HasPrefix(info.Version, "nginx 1.") || strings.Join(info.Protocols, ",") != "h1,h2" {
		t.Fatalf("hello %+v", info)
	}
	base := "https://127.0.0.1:" + strconv.Itoa(info.Port)
	for _, proto := range []string{model.ProtoH1, model.ProtoH2} {
		c := peertest.LoopbackClient(t, info, proto)
		peertest.SameContent(t, c, base, proto)
		if resp, b := peertest.Get(t, c, base+"/site/demo/"); resp.StatusCode != 200 || string(b) != "<p>hello</p>" {
			t.Fatalf("%s site: %d %q", proto, resp.StatusCode, b)
		}
	}
	pid, dir := p.ProcessID(), p.Dir()
	p.Close()
	if _, err := os.Stat(dir); err == nil {
		t.Fatalf("scratch directory %s remains", dir)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
		t.Fatalf("nginx master %d still exists", pid)
	}
}
