package browser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
)

// newNetNS creates a network namespace named qb<random> with loopback up,
// removed at cleanup, and returns its file path.
func newNetNS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		testsupport.Unavailable(t, "creating a network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testsupport.Unavailable(t, "ip(8) is not installed")
	}
	b := make([]byte, 4)
	rand.Read(b)
	name := "qbbr" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s link set lo up: %v: %s", name, err, out)
	}
	return "/run/netns/" + name
}

// listenInNS opens a TCP listener and a UDP socket with the same port on
// 127.0.0.1 inside the namespace at path. Sockets keep the namespace they
// were made in, so the servers can run on any goroutine afterwards.
func listenInNS(path string) (net.Listener, net.PacketConn, error) {
	type result struct {
		ln  net.Listener
		udp net.PacketConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		var r result
		r.err = errors.New("no port free on both TCP and UDP")
		for range 20 {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				r.err = err
				break
			}
			udp, err := net.ListenPacket("udp", ln.Addr().String())
			if err == nil {
				r = result{ln: ln, udp: udp}
				break
			}
			ln.Close()
		}
		// Only a thread back in its own namespace may return to the pool;
		// otherwise it stays locked and dies with this goroutine.
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- r
	}()
	r := <-ch
	return r.ln, r.udp, r.err
}

func TestLoadInNetNS(t *testing.T) {
	requireChromium(t)
	ns := newNetNS(t)
	tcp, udp, err := listenInNS(ns)
	if err != nil {
		t.Fatal(err)
	}
	srv := serveOn(t, serverConfig{objects: testObjects, altSvc: true}, tcp, udp)

	// The server is only reachable inside the namespace.
	if c, err := net.DialTimeout("tcp", tcp.Addr().String(), time.Second); err == nil {
		c.Close()
		testsupport.Unavailable(t, "%s is also served in the test's own namespace; cannot prove isolation", tcp.Addr())
	}
	res, err := Load(context.Background(), Options{
		URL: srv.url("/"), Protocol: model.ProtoH3, SPKIHash: srv.spki,
		NetNS: ns, ProfileDir: profileParent(t),
	})
	if err != nil {
		t.Fatalf("Load in %s: %v", ns, err)
	}
	if len(res.Resources) != testObjects+1 || srv.requests("HTTP/3.0") != testObjects+1 {
		t.Errorf("%d resources, server saw %d h3 requests; want %d", len(res.Resources), srv.requests("HTTP/3.0"), testObjects+1)
	}
}
