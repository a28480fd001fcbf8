// Package peertest holds what the tests of quicbench's peer servers share:
// an HTTP client for a peer listening on the loopback interface, and the
// check that a peer sends quicbench's resources byte for byte as
// quicbench's own server does. Only test files import it.
package peertest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/model"
)

// LoopbackClient returns an HTTP client that fetches from a peer on 127.0.0.1 over h1, h2 or h3.
func LoopbackClient(t testing.TB, info endpoint.ServerInfo, proto string) *http.Client {
	t.Helper()
	pool, err := certs.PoolFromPEM([]byte(info.CAPEM))
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	switch proto {
	case model.ProtoH3:
		tr := &http3.Transport{TLSClientConfig: tc}
		t.Cleanup(func() { tr.Close() })
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	default:
		tr := &http.Transport{TLSClientConfig: tc}
		var p http.Protocols
		p.SetHTTP1(proto == model.ProtoH1)
		p.SetHTTP2(proto == model.ProtoH2)
		tr.Protocols = &p
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	}
}

// Get fetches url with c and returns the response and its whole body.
func Get(t testing.TB, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, b
}

// SameContent fetches a page with its objects and a /bytes body from
// a peer and compares them byte for byte with what quicbench's server
// sends (package content).
func SameContent(t testing.TB, c *http.Client, base, proto string) {
	t.Helper()
	SameContentAs(t, c, base, proto, Server{NoStore: true})
}

// Server says what a peer server does beside quicbench's resources.
type Server struct {
	// DirSlash: it answers a page's document only at its path with a
	// trailing slash (its stack's dir_slash).
	DirSlash bool
	// NoStore: it marks responses uncacheable (Cache-Control: no-store),
	// as quicbench's server does.
	NoStore bool
}

// SameContentAs is SameContent for a server that does what srv says.
func SameContentAs(t testing.TB, c *http.Client, base, proto string, srv Server) {
	t.Helper()
	const pagePath = "/page/4/100-3KB"
	pg, err := content.ParsePage("4", "100-3KB")
	if err != nil {
		t.Fatal(err)
	}
	docPath := pagePath
	if srv.DirSlash {
		docPath += "/"
	}
	resp, b := Get(t, c, base+docPath)
	if resp.StatusCode != 200 || !bytes.Equal(b, pg.HTML(pagePath)) || (srv.NoStore && resp.Header.Get("Cache-Control") != "no-store") {
		t.Fatalf("%s %s: status %d, headers %v, body %q, want %q", proto, docPath, resp.StatusCode, resp.Header, b, pg.HTML(pagePath))
	}
	if resp.Proto != map[string]string{model.ProtoH1: "HTTP/1.1", model.ProtoH2: "HTTP/2.0", model.ProtoH3: "HTTP/3.0"}[proto] {
		t.Fatalf("%s: response over %s", proto, resp.Proto)
	}
	for i := range pg.Objects {
		var want bytes.Buffer
		if err := content.WriteObject(&want, pg.ObjectSize(i)); err != nil {
			t.Fatal(err)
		}
		p := content.ObjectPath(pagePath, i)
		resp, b := Get(t, c, base+p)
		if resp.StatusCode != 200 || !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("%s %s: status %d, %d bytes differing from quicbench's %d", proto, p, resp.StatusCode, len(b), want.Len())
		}
	}
	resp, b = Get(t, c, base+"/bytes/300000")
	var v content.Verifier
	if resp.StatusCode != 200 || len(b) != 300000 || v.Check(b) != nil {
		t.Fatalf("%s /bytes/300000: status %d, %d bytes, %v", proto, resp.StatusCode, len(b), v.Check(b))
	}
}

// StatsSource is a server that reports its connections' statistics
// (*endpoint.Server, *endpoint.PeerServer).
type StatsSource interface {
	ConnStats(ctx context.Context, kind, addr string) (model.TransportStats, error)
}

// OpenConnectionStats checks that srv (listening as info says) reads a QUIC
// connection that has not ended when a wait for its end gives up: a
// connection that completed its handshake and stays open (as when the link
// lost the client's CONNECTION_CLOSE) is reported with endpoint.ErrStillOpen
// and its statistics so far (packets sent, an RTT sample, congestion
// control cc); once the client closes it, its final statistics come
// without an error.
func OpenConnectionStats(t testing.TB, srv StatsSource, info endpoint.ServerInfo, cc string) {
	t.Helper()
	pool, err := certs.PoolFromPEM([]byte(info.CAPEM))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}) // the address the server sees
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	conn, err := quic.Dial(ctx, udp, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: info.Port},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{http3.NextProtoH3}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	local := conn.LocalAddr().String()
	wait := func(d time.Duration) (model.TransportStats, error) {
		wctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return srv.ConnStats(wctx, "quic", local)
	}
	// The server's side of the handshake may trail the client's.
	var st model.TransportStats
	for range 20 {
		if st, err = wait(100 * time.Millisecond); !errors.Is(err, endpoint.ErrStillOpen) || st.PacketsSent > 0 {
			break
		}
	}
	if !errors.Is(err, endpoint.ErrStillOpen) || st.Kind != "quic" || st.PacketsSent <= 0 || st.SmoothedRTTms <= 0 || st.CongestionAlgo != cc {
		_ = conn.CloseWithError(0, "")
		t.Fatalf("open connection from %s: %+v, %v (want its statistics with ErrStillOpen, cc %s)", local, st, err, cc)
	}
	if err := conn.CloseWithError(0, ""); err != nil {
		t.Fatal(err)
	}
	final, err := wait(5 * time.Second)
	if err != nil || final.PacketsSent < st.PacketsSent {
		t.Fatalf("after the close: %+v, %v (open: %d packets sent)", final, err, st.PacketsSent)
	}
	if _, err := wait(50 * time.Millisecond); err == nil || errors.Is(err, endpoint.ErrStillOpen) {
		t.Fatalf("a connection that ended was handed out twice or read open: %v", err)
	}
}
