package endpoint

import (
	"context"
	"crypto/x509"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint/replay"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
)

// TestReplayOrigins serves a generated 6-origin page on loopback
// addresses 127.0.0.10 and up (port 443: root) and fetches every entry
// from its origin's address with the origin's server name, over h1, h2
// and h3: every request is answered, from its own origin's address, with
// a certificate for its name, over the protocol asked for.
func TestReplayOrigins(t *testing.T) {
	testsupport.RequireRoot(t, "a replay listens on port 443")
	h, err := sites.BuildPage(sites.PageShape{Name: "p", Origins: 6, Requests: 30, Bytes: 200_000, SharedIPs: 1, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	a, err := replay.Prepare("p", h, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := replay.NewLayout(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Assign(netip.MustParseAddr("127.0.0.2")); err != nil {
		t.Fatal(err)
	}
	o, err := replay.NewOrigins(l, []*replay.Archive{a})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := StartServer(context.Background(), ServerConfig{Host: "127.0.0.1", Protocols: []string{model.ProtoH1, model.ProtoH2, model.ProtoH3}, Replay: o})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	info := srv.Info()
	if len(info.ReplayAddrs) != 5 || len(info.Replay) != 1 {
		t.Fatalf("hello: replay %v at %v, want 1 archive at 5 addresses", info.Replay, info.ReplayAddrs)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(info.CAPEM))
	addrs := l.HostAddrs()
	paths := map[string][]string{}
	var hosts []string
	for _, e := range h.Log.Entries {
		u, _ := url.Parse(e.Request.URL)
		if paths[u.Hostname()] == nil {
			hosts = append(hosts, u.Hostname())
		}
		paths[u.Hostname()] = append(paths[u.Hostname()], u.RequestURI())
	}
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoH3} {
		if err := o.Begin("p", proto); err != nil {
			t.Fatal(err)
		}
		for _, host := range hosts {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			fr, err := Fetch(ctx, FetchSpec{Proto: proto, Addr: net.JoinHostPort(addrs[host], "443"), ServerName: host,
				Paths: paths[host], Parallel: len(paths[host]), RootCAs: pool})
			cancel()
			if err != nil {
				t.Fatalf("%s %s: %v", proto, host, err)
			}
			for _, r := range fr.Requests {
				if r.Status != 200 {
					t.Errorf("%s https://%s%s: status %d", proto, host, r.Path, r.Status)
				}
			}
		}
		st := o.End()
		conns := st.Connections()
		want := map[string]string{model.ProtoH1: "http/1.1", model.ProtoH2: "h2", model.ProtoH3: "h3"}[proto]
		if st.Requests != len(h.Log.Entries) || st.Unmatched != 0 || st.Misrouted != 0 || st.WrongProtocol != 0 || len(st.Origins) != 6 {
			t.Fatalf("%s: stats %+v", proto, st)
		}
		if len(conns) != 1 || conns[want] < 6 {
			t.Fatalf("%s: connections %v, want at least 6 over %s only", proto, conns, want)
		}
		for _, os := range st.Origins {
			if os.Addr != addrs[os.Host] || os.Requests == 0 {
				t.Errorf("%s: origin %+v, want served at %s", proto, os, addrs[os.Host])
			}
		}
	}
	// A name the address does not serve gets another name's certificate:
	// the client refuses it.
	host := hosts[0]
	other := hosts[1]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Fetch(ctx, FetchSpec{Proto: model.ProtoH2, Addr: net.JoinHostPort(addrs[other], "443"), ServerName: host, Paths: []string{"/"}, RootCAs: pool})
	if addrs[other] != addrs[host] && (err == nil || !strings.Contains(err.Error(), "certificate")) {
		t.Fatalf("%s at %s's address: %v, want a certificate error", host, other, err)
	}
}
