package endpoint

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/model"
)

// dialFrom connects to raddr from laddr (nil: any port) with SO_REUSEADDR,
// so that a later connection may use the same local port.
func dialFrom(t *testing.T, laddr *net.TCPAddr, raddr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: laddr, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1) })
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", raddr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConnStatsReusedAddress: a connection from a client address whose
// earlier connection's statistics were never asked for gets its own
// statistics, after it ends, not the earlier connection's.
func TestConnStatsReusedAddress(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{Protocols: []string{model.ProtoH1, model.ProtoH1C}})

	// Connection A: cleartext HTTP, 4 MB down; the server closes it.
	a := dialFrom(t, nil, srv.PlainAddr())
	local := a.LocalAddr().(*net.TCPAddr)
	if _, err := io.WriteString(a, "GET /bytes/4MB HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, a); err != nil || n < 4e6 {
		t.Fatalf("connection A: %d bytes, %v", n, err)
	}
	a.Close()
	key := bookKey("tcp", local.String())
	var old model.TransportStats
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		srv.book.mu.Lock()
		r, ok := srv.book.done[key]
		srv.book.mu.Unlock()
		if ok {
			old = r.st
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("connection A's statistics were not recorded")
		}
	}

	// Connection B from the same address (to the TLS port, so that the
	// 4-tuple differs from A's, which is in TIME_WAIT): only a handshake.
	b := tls.Client(dialFrom(t, local, srv.Addr()), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
	if err := b.Handshake(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if st, err := srv.ConnStats(ctx, "tcp", local.String()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while B is open: got %+v, %v; want to wait for B to end (A's: %+v)", st, err, old)
	}
	b.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := srv.ConnStats(ctx, "tcp", local.String())
	if err != nil {
		t.Fatal(err)
	}
	if st.PacketsSent >= old.PacketsSent {
		t.Fatalf("got A's statistics? B (a handshake) sent %d segments, A (4 MB) %d", st.PacketsSent, old.PacketsSent)
	}
}
