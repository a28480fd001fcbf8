package ngtcp2

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/peertest"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

func requireNgtcp2(t *testing.T) {
	t.Helper()
	st, _ := peers.Lookup(Name)
	for _, role := range st.Roles() {
		if _, _, err := peers.Check(context.Background(), st, role); err != nil {
			testsupport.Unavailable(t, "%v", err)
		}
	}
}

// TestServerServesQuicbenchContent runs gtlsserver on the loopback
// interface: it sends quicbench's page, objects and /bytes bodies byte for
// byte (the page at its path with a slash), runs the congestion control
// asked for, and gives each connection's statistics from its qlog.
func TestServerServesQuicbenchContent(t *testing.T) {
	requireNgtcp2(t)
	keys := filepath.Join(t.TempDir(), "keys.log")
	p, err := endpoint.StartPeer(context.Background(), endpoint.PeerConfig{Impl: Name, Host: "127.0.0.1", CongestionControl: "reno",
		Paths: []string{"/page/4/100-3KB", "/bytes/300000"}, KeyLogFile: keys, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	info := p.Info()
	if info.Impl != Name || !strings.HasPrefix(info.Version, "ngtcp2 0.12") || strings.Join(info.Protocols, ",") != "h3" || info.Settings["cc"] != "reno" {
		t.Fatalf("hello %+v", info)
	}
	c := peertest.LoopbackClient(t, info, model.ProtoH3)
	peertest.SameContentAs(t, c, "https://127.0.0.1:"+strconv.Itoa(info.Port), model.ProtoH3, peertest.Server{DirSlash: true})
	c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := p.ConnStats(ctx, "quic", "127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if st.Side != "server" || st.CongestionAlgo != "reno" || st.PacketsSent < 200 || st.CwndBytes <= 0 || st.SmoothedRTTms < 0 {
		t.Fatalf("statistics %+v", st)
	}
	if b, err := os.ReadFile(keys); err != nil || !strings.Contains(string(b), "SERVER_TRAFFIC_SECRET_0") {
		t.Fatalf("key log: %v %q", err, b)
	}
}

// TestClientFetchesFromQuicbench runs gtlsclient against quicbench's own
// server on the loopback interface: a download's and a multiplex's records
// come from its qlog, with every body checked.
func TestClientFetchesFromQuicbench(t *testing.T) {
	requireNgtcp2(t)
	srv, err := endpoint.StartServer(context.Background(), endpoint.ServerConfig{Host: "127.0.0.1", Port: 0, PlainPort: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	info := srv.Info()
	req := workload.Request{Protocol: model.ProtoH3, Client: Name, CC: "cubic",
		Target: workload.Target{Host: "127.0.0.1", Port: info.Port, CAPEM: info.CAPEM}}
	fr, _, err := fetch(context.Background(), req, endpoint.FetchSpec{Proto: model.ProtoH3, Paths: []string{"/bytes/2MB"}})
	if err != nil {
		t.Fatal(err)
	}
	r := fr.Requests[0]
	c := fr.Conns[0]
	if r.Status != 200 || r.Bytes != 2_000_000 || r.FirstByte < r.Start || r.End < r.FirstByte || c.Handshake <= 0 ||
		c.Transport.CongestionAlgo != "cubic" || c.Transport.PacketsSent <= 0 || fr.CPU.ClientUser+fr.CPU.ClientSys <= 0 {
		t.Fatalf("record %+v", fr)
	}
	var sum int
	for _, ch := range r.Chunks {
		sum += ch.Bytes
	}
	if sum != 2_000_000 {
		t.Fatalf("chunks sum to %d bytes", sum)
	}
	fr, _, err = fetch(context.Background(), req, endpoint.FetchSpec{Proto: model.ProtoH3, Paths: []string{"/bytes/100KB"}, Repeat: 4})
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Requests) != 4 || fr.Bytes != 400_000 {
		t.Fatalf("multiplex: %d requests, %d bytes", len(fr.Requests), fr.Bytes)
	}
	for _, spec := range []endpoint.FetchSpec{
		{Proto: model.ProtoH2, Paths: []string{"/bytes/1"}},
		{Proto: model.ProtoH3, Paths: []string{"/"}, Page: true},
		{Proto: model.ProtoH3, Paths: []string{"/upload"}, Upload: 10},
		{Proto: model.ProtoH3, Paths: []string{"/bytes/1"}, Repeat: 4, Parallel: 2},
		{Proto: model.ProtoH3, Paths: []string{"/echo"}},
	} {
		if _, _, err := fetch(context.Background(), req, spec); err == nil {
			t.Errorf("%+v accepted", spec)
		}
	}
}
