package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/model"
)

func bookWait(b *statsBook, addr string, d time.Duration) (model.TransportStats, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return b.wait(ctx, "quic", addr)
}

func TestStatsBookReusedAddress(t *testing.T) {
	const addr = "10.0.0.1:40000"
	old := model.TransportStats{Kind: "quic", PacketsSent: 1}
	cur := model.TransportStats{Kind: "quic", PacketsSent: 2}

	// A connection ended and nobody asked for its statistics; a new
	// connection from the same address (a reused port) is accepted.
	b := newStatsBook(16)
	b.put(b.open("quic", addr), old)
	ref := b.open("quic", addr)
	if st, err := bookWait(b, addr, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while the new connection is open: got %+v, %v; want to wait for it", st, err)
	}
	b.put(ref, cur)
	if st, err := bookWait(b, addr, time.Second); err != nil || st != cur {
		t.Fatalf("after the new connection ended: got %+v, %v; want %+v", st, err, cur)
	}

	// The older connection ends after a newer one from its address was
	// accepted: its statistics must not stand for the newer one.
	b = newStatsBook(16)
	first := b.open("quic", addr)
	second := b.open("quic", addr)
	b.put(first, old)
	if st, err := bookWait(b, addr, 50*time.Millisecond); err == nil {
		t.Fatalf("superseded connection's statistics returned: %+v", st)
	}
	b.put(second, cur)
	if st, err := bookWait(b, addr, time.Second); err != nil || st != cur {
		t.Fatalf("got %+v, %v; want %+v", st, err, cur)
	}
	if len(b.live) != 0 || len(b.done) != 0 {
		t.Fatalf("book not empty: live %v, done %v", b.live, b.done)
	}
}

// TestStatsBookReadsOpenConnection: a wait whose deadline passes while a
// watched connection is open (its close was lost) returns what the reader
// reads, with ErrStillOpen; a cancelled wait, an unwatched connection and
// a superseded reader do not read; a reader that fails because the
// connection just ended yields the end's record.
func TestStatsBookReadsOpenConnection(t *testing.T) {
	const addr = "10.0.0.1:40000"
	now := model.TransportStats{Kind: "quic", PacketsSent: 7}
	final := model.TransportStats{Kind: "quic", PacketsSent: 8}
	b := newStatsBook(16)
	ref := b.open("quic", addr)
	if _, err := bookWait(b, addr, 20*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrStillOpen) {
		t.Fatalf("unwatched: %v", err)
	}
	reads := 0
	b.watch(ref, func(context.Context) (model.TransportStats, error) { reads++; return now, nil })
	if st, err := bookWait(b, addr, 20*time.Millisecond); !errors.Is(err, ErrStillOpen) || st != now {
		t.Fatalf("open: %+v, %v", st, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.wait(ctx, "quic", addr); !errors.Is(err, context.Canceled) || reads != 1 {
		t.Fatalf("cancelled: %v after %d reads", err, reads)
	}
	b.put(ref, final)
	if st, err := bookWait(b, addr, time.Second); err != nil || st != final {
		t.Fatalf("ended: %+v, %v", st, err)
	}
	if _, err := bookWait(b, addr, 20*time.Millisecond); errors.Is(err, ErrStillOpen) || err == nil || reads != 1 {
		t.Fatalf("after the end: %v, %d reads", err, reads)
	}

	// A newer connection from the address drops the older one's reader.
	old := b.open("quic", addr)
	b.watch(old, func(context.Context) (model.TransportStats, error) { return now, nil })
	b.open("quic", addr)
	if _, err := bookWait(b, addr, 20*time.Millisecond); errors.Is(err, ErrStillOpen) {
		t.Fatal("the superseded connection's reader was used")
	}

	// The connection ends while its reader asks (a program prints its end
	// before answering that it has no such connection).
	b = newStatsBook(16)
	ref = b.open("quic", addr)
	b.watch(ref, func(context.Context) (model.TransportStats, error) {
		b.put(ref, final)
		return model.TransportStats{}, errors.New("no open connection")
	})
	if st, err := bookWait(b, addr, 20*time.Millisecond); err != nil || st != final {
		t.Fatalf("ended while read: %+v, %v", st, err)
	}
	if len(b.live) != 0 || len(b.done) != 0 || len(b.readers) != 0 || len(b.waiters) != 0 {
		t.Fatalf("book not empty: %+v", b)
	}
}

func TestStatsBookHandsOutOnce(t *testing.T) {
	const addr = "[::ffff:10.0.0.1]:40000" // the same key as 10.0.0.1:40000
	st := model.TransportStats{Kind: "quic", PacketsSent: 3}
	b := newStatsBook(16)
	b.put(b.open("quic", "10.0.0.1:40000"), st)
	if got, err := bookWait(b, addr, time.Second); err != nil || got != st {
		t.Fatalf("got %+v, %v", got, err)
	}
	if got, err := bookWait(b, addr, 50*time.Millisecond); err == nil {
		t.Fatalf("record handed out twice: %+v", got)
	}

	// Waiters (two asking for the same connection) receive it when it ends.
	ref := b.open("quic", addr)
	res := make(chan error, 2)
	for range 2 {
		go func() {
			got, err := bookWait(b, addr, 5*time.Second)
			if err == nil && got != st {
				err = fmt.Errorf("got %+v", got)
			}
			res <- err
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		b.mu.Lock()
		n := len(b.waiters[bookKey("quic", addr)])
		b.mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.put(ref, st)
	for range 2 {
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	}
	if len(b.done) != 0 || len(b.waiters) != 0 {
		t.Fatalf("book not empty: done %v, waiters %v", b.done, b.waiters)
	}

	// An abandoned connection (statistics unreadable) leaves nothing.
	b.abandon(b.open("tcp", addr))
	if len(b.live) != 0 {
		t.Fatalf("abandoned connection still live: %v", b.live)
	}
}

func TestStatsBookLimit(t *testing.T) {
	b := newStatsBook(2)
	for i := range 3 {
		b.put(b.open("tcp", fmt.Sprintf("10.0.0.1:%d", 1000+i)), model.TransportStats{PacketsSent: int64(i)})
	}
	if _, err := bookWait(b, "10.0.0.1:1000", 0); err == nil {
		t.Fatal("oldest record kept beyond the limit")
	}
	for i := 1; i < 3; i++ {
		ctx := context.Background()
		if st, err := b.wait(ctx, "tcp", fmt.Sprintf("10.0.0.1:%d", 1000+i)); err != nil || st.PacketsSent != int64(i) {
			t.Fatalf("record %d: %+v, %v", i, st, err)
		}
	}
	// Records handed out do not pile up in the eviction order.
	for i := range 1000 {
		addr := fmt.Sprintf("10.0.0.2:%d", i)
		b.put(b.open("tcp", addr), model.TransportStats{})
		if _, err := b.wait(context.Background(), "tcp", addr); err != nil {
			t.Fatal(err)
		}
	}
	if len(b.order) > 2*b.limit+64 {
		t.Fatalf("eviction order holds %d refs", len(b.order))
	}
}

func TestAltSvcNamesTheQUICPort(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	udpPort := srv.quic.Addr().(*net.UDPAddr).Port
	want := fmt.Sprintf(`h3=":%d"; ma=86400`, udpPort)
	for _, proto := range []string{model.ProtoH1, model.ProtoH2} {
		var p http.Protocols
		p.SetHTTP1(proto == model.ProtoH1)
		p.SetHTTP2(proto == model.ProtoH2)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, Protocols: &p}
		resp, err := (&http.Client{Transport: tr}).Get("https://" + srv.Addr() + "/echo")
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if wantMajor := map[string]int{model.ProtoH1: 1, model.ProtoH2: 2}[proto]; resp.ProtoMajor != wantMajor {
			t.Fatalf("%s: response over %s", proto, resp.Proto)
		}
		if got := resp.Header.Get("Alt-Svc"); got != want {
			t.Fatalf("%s: Alt-Svc %q, want %q", proto, got, want)
		}
	}
	// The advertised port serves HTTP/3.
	port := strings.TrimSuffix(strings.TrimPrefix(want, `h3=":`), `"; ma=86400`)
	spec := specFor(srv, pool, model.ProtoH3, "/echo")
	spec.Addr = net.JoinHostPort("127.0.0.1", port)
	if _, err := Fetch(context.Background(), spec); err != nil {
		t.Fatalf("HTTP/3 on the advertised port %s: %v", port, err)
	}
	if strconv.Itoa(srv.Info().Port) != port {
		t.Fatalf("advertised port %s, server port %d", port, srv.Info().Port)
	}
}

// openConns returns how many connections the server still holds.
func openConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func TestRawTCPIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	srv, pool := testServer(t, ServerConfig{Protocols: []string{model.ProtoTCP}, IdleTimeout: idle})
	dial := func(t *testing.T) *tls.Conn {
		t.Helper()
		c, err := tls.Dial("tcp", srv.Addr(), &tls.Config{RootCAs: pool, NextProtos: []string{raw.ALPN}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	header := func(r raw.Request) []byte { return raw.AppendRequest(nil, r) }
	stuck := map[string]func(c *tls.Conn){
		"silent after the handshake": func(*tls.Conn) {},
		"partial request header":     func(c *tls.Conn) { c.Write(header(raw.Request{Size: 10})[:7]) },
		"upload stalls": func(c *tls.Conn) {
			c.Write(header(raw.Request{Size: 10, Upload: 1000}))
			c.Write(make([]byte, 100))
		},
		"idle between requests": func(c *tls.Conn) {
			c.Write(header(raw.Request{Size: 10}))
			io.ReadFull(c, make([]byte, raw.ResponseHeaderSize+10))
		},
		// The server's writes block once the socket buffers are full.
		"response not read": func(c *tls.Conn) { c.Write(header(raw.Request{Size: 1 << 30})) },
	}
	for name, act := range stuck {
		t.Run(name, func(t *testing.T) {
			c := dial(t)
			act(c)
			deadline := time.Now().Add(5 * time.Second)
			for openConns(srv) != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("the server still holds the connection after %v (idle timeout %v)", 5*time.Second, idle)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}

	// A slow client that keeps making progress is not cut off: an upload
	// sent in pieces over 3 idle periods.
	c := dial(t)
	if _, err := c.Write(header(raw.Request{Size: 100, Upload: 400})); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		time.Sleep(idle * 3 / 4)
		if _, err := c.Write(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var hdr [raw.ResponseHeaderSize]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		t.Fatalf("slow upload: %v", err)
	}
	resp, err := raw.ParseResponse(hdr[:])
	if err != nil || resp.Status != raw.StatusOK || resp.UploadBytes != 400 || resp.Size != 100 {
		t.Fatalf("slow upload: %+v, %v", resp, err)
	}
}
