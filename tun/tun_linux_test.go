package tun

import (
	"net"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/internal/testsupport"
)

// inFreshNetNS runs fn on a thread moved to a new, empty network namespace;
// the thread is discarded afterwards.
func inFreshNetNS(t *testing.T, fn func() error) {
	t.Helper()
	testsupport.RequireRoot(t, "needs root")
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCreateAndClose(t *testing.T) {
	for _, opts := range []Options{{}, {VnetHdr: true}, {VnetHdr: true, Offloads: OffloadCsum | OffloadTSO4 | OffloadTSO6 | OffloadECN}} {
		inFreshNetNS(t, func() error {
			d, err := Create("qbtest0", opts)
			if err != nil {
				return err
			}
			if d.Name() != "qbtest0" || d.VnetHdr() != opts.VnetHdr || d.Fd() < 0 {
				t.Errorf("device %q vnet %v fd %d", d.Name(), d.VnetHdr(), d.Fd())
			}
			if _, err := net.InterfaceByName("qbtest0"); err != nil {
				t.Errorf("interface missing after Create: %v", err)
			}
			// Nothing queued: a read does not block.
			if _, err := d.Read(make([]byte, 2048)); err != ErrWouldBlock {
				t.Errorf("read on an idle device: %v, want ErrWouldBlock", err)
			}
			if err := d.Close(); err != nil {
				return err
			}
			if err := d.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
			if _, err := net.InterfaceByName("qbtest0"); err == nil {
				t.Error("interface still exists after Close")
			}
			return nil
		})
	}
}

func TestCreateRejectsBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		want string
	}{
		{"", Options{}, "1 to 15 bytes"},
		{strings.Repeat("x", 16), Options{}, "1 to 15 bytes"},
		{"qb0", Options{Offloads: OffloadTSO4}, "require VnetHdr"},
	} {
		if _, err := Create(c.name, c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Create(%q, %+v) = %v, want an error about %q", c.name, c.opts, err, c.want)
		}
	}
}
