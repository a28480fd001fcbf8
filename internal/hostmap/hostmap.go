// Package hostmap makes host names resolve to a replay's addresses for a
// process and every process it starts, without any lookup leaving the
// machine: in the process's own mount namespace, /etc/hosts is replaced
// (bind mount) by a file that maps the names, /etc/nsswitch.conf by a copy
// whose hosts line is "files" only (no DNS, no mDNS, no systemd-resolved
// over its socket), and /etc/resolv.conf by one naming only 127.0.0.1 (for
// programs that query DNS themselves). A name that is not mapped fails at
// once.
//
// It refuses to run in a mount namespace it shares with its parent or
// with init: there the bind mounts would change what other programs of
// the machine see. The client agent gets a mount namespace of its own
// from the runner (CLONE_NEWNS, see StartPrivate), so the mapping is the
// agent's and its browsers' only, and it goes with the agent.
//
// Linux only; needs CAP_SYS_ADMIN in the mount namespace's user namespace.
package hostmap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/quicbench/quicbench/internal/safefs"
	"golang.org/x/sys/unix"
)

// The files replaced.
const (
	HostsFile    = "/etc/hosts"
	NsswitchFile = "/etc/nsswitch.conf"
	ResolvFile   = "/etc/resolv.conf"
)

// ErrShared is returned when the process shares its mount namespace with
// its parent or with init.
var ErrShared = errors.New("hostmap: this process shares its mount namespace with its parent or init; refusing to replace /etc/hosts (the runner starts the client agent in a mount namespace of its own)")

// Map is an installed mapping; Set changes it.
type Map struct {
	mu  sync.Mutex
	f   *os.File // the file bind-mounted on /etc/hosts (unlinked)
	cur map[string]string
}

var (
	installed   *Map
	installMu   sync.Mutex
	installErrs error
)

// Private reports whether the process has a mount namespace of its own:
// not its parent's, not init's (safefs.OwnMountNamespace).
func Private() (bool, error) { return safefs.OwnMountNamespace() }

// Set makes the names of hosts (name -> IPv4 or IPv6 address) resolve to
// their addresses in this process and its children, from now on, and
// every other name fail. The first call installs the files (they exist
// only as the bind mounts); later calls rewrite the hosts file in place.
func Set(hosts map[string]string) (*Map, error) {
	if err := check(hosts); err != nil {
		return nil, err
	}
	installMu.Lock()
	defer installMu.Unlock()
	if installed == nil {
		if installErrs != nil {
			return nil, installErrs
		}
		m, err := install()
		if err != nil {
			installErrs = err
			return nil, err
		}
		installed = m
	}
	return installed, installed.set(hosts)
}

// check refuses names and addresses that would not be one hosts line.
func check(hosts map[string]string) error {
	for name, addr := range hosts {
		if _, err := netip.ParseAddr(addr); err != nil {
			return fmt.Errorf("hostmap: %s: address %q: %v", name, addr, err)
		}
		if name == "" || len(name) > 253 || strings.ContainsAny(name, " \t\r\n#/\\:") {
			return fmt.Errorf("hostmap: %q is not a host name", name)
		}
	}
	return nil
}

func install() (*Map, error) {
	ok, err := Private()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrShared
	}
	dir, err := os.MkdirTemp("", "quicbench-hostmap-")
	if err != nil {
		return nil, err
	}
	// The mounts keep the files; the directory goes at once.
	defer os.RemoveAll(dir)
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(hosts, []byte(render(nil)), 0o644); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(hosts, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	m := &Map{f: f}
	ns, err := nsswitch()
	if err != nil {
		return nil, err
	}
	nsFile := filepath.Join(dir, "nsswitch.conf")
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(nsFile, ns, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(resolv, []byte("# quicbench: no DNS server for a replay's client\nnameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		return nil, err
	}
	for _, b := range []struct{ src, dst string }{{hosts, HostsFile}, {nsFile, NsswitchFile}, {resolv, ResolvFile}} {
		if _, err := os.Stat(b.dst); errors.Is(err, os.ErrNotExist) && b.dst != HostsFile {
			continue // nothing to replace: glibc's defaults need no DNS server here either
		}
		if err := unix.Mount(b.src, b.dst, "", unix.MS_BIND, ""); err != nil {
			f.Close()
			return nil, fmt.Errorf("hostmap: bind %s on %s: %w", b.src, b.dst, err)
		}
	}
	return m, nil
}

// nsswitch is the system's nsswitch.conf with the hosts line "files".
func nsswitch() ([]byte, error) {
	b, err := os.ReadFile(NsswitchFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	var out bytes.Buffer
	out.WriteString("# quicbench: names resolve from /etc/hosts only\n")
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "hosts:" || f[0] == "hosts") {
			continue
		}
		out.WriteString(line + "\n")
	}
	out.WriteString("hosts: files\n")
	return out.Bytes(), nil
}

// render writes a hosts file: localhost, then the mapping by name.
func render(hosts map[string]string) string {
	var b strings.Builder
	b.WriteString("# quicbench replay: names of the recorded origins and their replay addresses\n127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
	names := make([]string, 0, len(hosts))
	for n := range hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", hosts[n], n)
	}
	return b.String()
}

func (m *Map) set(hosts map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mapsEqual(m.cur, hosts) {
		return nil
	}
	// In place (same inode): the bind mount shows that file.
	data := []byte(render(hosts))
	if err := m.f.Truncate(0); err != nil {
		return err
	}
	if _, err := m.f.WriteAt(data, 0); err != nil {
		return err
	}
	m.cur = make(map[string]string, len(hosts))
	for k, v := range hosts {
		m.cur[k] = v
	}
	return nil
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) || a == nil {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// PrivateMounts asks for a new mount namespace for a process about to be
// started (Go makes its mounts private, so nothing propagates back):
// where hostmap may replace the files.
func PrivateMounts(attr *syscall.SysProcAttr) { attr.Unshareflags |= syscall.CLONE_NEWNS }

// Hosts renders the hosts file a mapping gives (for display).
func Hosts(hosts map[string]string) string { return render(hosts) }
