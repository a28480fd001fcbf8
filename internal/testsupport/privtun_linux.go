// Package testsupport holds helpers that tests of several packages share.
// Nothing outside tests uses it.
package testsupport

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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

// NobodyDir returns a new temporary directory that user nobody may enter
// and read (mode 0755), removed when the test ends.
func NobodyDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// RunAsNobody copies the running test binary into dir (see NobodyDir) and
// runs the copy as user nobody (uid and gid 65534) with args, in dir, with
// this process's environment plus env; it returns the combined output.
func RunAsNobody(dir string, env []string, args ...string) (string, error) {
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		return "", err
	}
	exe := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append(withoutRequire(os.Environ()), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// withoutRequire drops RequireEnv from an environment: a test binary run as
// nobody is a helper whose outcome its parent checks, and its own
// prerequisite checks (root above all) must skip, not fail, there.
func withoutRequire(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, RequireEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}
