package netns

import (
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/quicbench/quicbench/internal/sockdiag"
	"github.com/quicbench/quicbench/internal/testsupport"
)

// ccOfConnection opens a TCP connection from the client to the server
// namespace, the client's socket asking for ask (per socket; "" for
// nothing) and the server's listener asking for nothing, and returns the
// congestion control the kernel reports (sock_diag) for the client's and
// the server's socket.
func ccOfConnection(t *testing.T, tb *Testbed, ask string) (client, server string) {
	t.Helper()
	var ln net.Listener
	if err := tb.Do(Server, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(tb.Addr(Server), 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	var c net.Conn
	if err := tb.Do(Client, func() (err error) {
		d := net.Dialer{Timeout: 5 * time.Second, Control: CCControl(ask)}
		c, err = d.Dial("tcp4", ln.Addr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	a := <-accepted
	if a == nil {
		t.Fatal("accept failed")
	}
	defer a.Close()
	cl, sv := c.LocalAddr().(*net.TCPAddr).AddrPort(), c.RemoteAddr().(*net.TCPAddr).AddrPort()
	for _, q := range []struct {
		side          Side
		local, remote netip.AddrPort
		out           *string
	}{{Client, cl, sv, &client}, {Server, sv, cl, &server}} {
		if err := tb.Do(q.side, func() error {
			s, err := sockdiag.Lookup(q.local, q.remote)
			*q.out = s.CC
			return err
		}); err != nil {
			t.Fatalf("%s: %v", q.side, err)
		}
	}
	return client, server
}

// TestLinkCC checks that the testbed's congestion control reaches every
// TCP connection across the link, whatever the namespace default is (on a
// host that allows only reno and bbr as namespace defaults, cubic cannot
// be one) and whatever a socket asked for, and that SetCC switches it for
// new connections.
func TestLinkCC(t *testing.T) {
	tb := newTestbed(t, Config{CC: "cubic"})
	if cl, sv := ccOfConnection(t, tb, ""); cl != "cubic" || sv != "cubic" {
		t.Errorf("connection of sockets that chose nothing (namespace default %s): client %q, server %q; want cubic", tb.DefaultCC(), cl, sv)
	}
	if cl, sv := ccOfConnection(t, tb, "bbr"); cl != "cubic" || sv != "cubic" {
		t.Errorf("client socket that asked for bbr: client %q, server %q; want the link's cubic", cl, sv)
	}
	if err := tb.SetCC("reno"); err != nil {
		t.Fatal(err)
	}
	if tb.CC() != "reno" || tb.DefaultCC() != "reno" || tb.Sysctls()[sysCC] != "reno" {
		t.Errorf("after SetCC(reno): CC %q, default %q, recorded %q", tb.CC(), tb.DefaultCC(), tb.Sysctls()[sysCC])
	}
	if cl, sv := ccOfConnection(t, tb, ""); cl != "reno" || sv != "reno" {
		t.Errorf("after SetCC(reno): client %q, server %q", cl, sv)
	}
	if err := tb.SetCC("vegas"); err == nil {
		t.Error("SetCC(vegas) succeeded")
	}
}

// TestOwnEhash checks that a testbed's namespaces have TCP socket hash
// tables of their own (cheap socket listings), that the sysctls the kernel
// derives from the table's size keep the host's values, and that the host's
// setting is untouched.
func TestOwnEhash(t *testing.T) {
	requireRoot(t)
	hostChild, err := readSysctl("net.ipv4.tcp_child_ehash_entries")
	if err != nil {
		testsupport.Unavailable(t, "kernel without per-namespace TCP hash tables: %v", err)
	}
	host := map[string]string{}
	for _, k := range ehashDerived {
		if host[k], err = readSysctl(k); err != nil {
			t.Fatal(err)
		}
	}
	tb := newTestbed(t, Config{})
	for _, s := range []Side{Client, Server} {
		if err := tb.Do(s, func() error {
			if v, err := readSysctl("net.ipv4.tcp_ehash_entries"); err != nil || v != strconv.Itoa(childEhashEntries) {
				t.Errorf("%s: tcp_ehash_entries = %q (%v), want its own %d", s, v, err, childEhashEntries)
			}
			for k, want := range host {
				if v, _ := readSysctl(k); v != want {
					t.Errorf("%s: %s = %q, want the host's %q", s, k, v, want)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := readSysctl("net.ipv4.tcp_child_ehash_entries"); v != hostChild {
		t.Errorf("host tcp_child_ehash_entries changed from %q to %q", hostChild, v)
	}
}
