// Package testsupport holds helpers that tests of several packages share.
// Nothing outside tests uses it.
package testsupport

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// TUNPath is the TUN clone device.
const TUNPath = "/dev/net/tun"

// BindPrivateTUN gives the calling process's mount namespace a TUN clone
// device that ordinary users may open: it mounts a tmpfs on dir, makes a
// mode 0666 character device 10:200 there and binds it over TUNPath. It
// must run as root in a private mount namespace of its own (for example a
// child started with SysProcAttr.Unshareflags CLONE_NEWNS, whose mounts Go
// makes private), so that the host's node, whose mode may keep ordinary
// users out, is never changed: rootless mode can then be tested on a host
// that does not allow it.
func BindPrivateTUN(dir string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on %s: %w", dir, err)
	}
	node := dir + "/tun"
	if err := unix.Mknod(node, unix.S_IFCHR|0o666, int(unix.Mkdev(10, 200))); err != nil {
		return fmt.Errorf("mknod %s: %w", node, err)
	}
	if err := os.Chmod(node, 0o666); err != nil { // past the umask
		return err
	}
	if err := unix.Mount(node, TUNPath, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s over %s: %w", node, TUNPath, err)
	}
	return nil
}
