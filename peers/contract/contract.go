// Package contract runs the stacks a plan declares with the
// quic-interop-runner's endpoint contract (docs/plan-format.md, "Stacks of
// your own"): a command, the implementation's own run_endpoint.sh, run
// with ROLE=server in the server namespace or ROLE=client in the client
// namespace, with the contract's environment (TESTCASE, REQUESTS,
// SSLKEYLOGFILE, QLOGDIR, PORT) and directories (/www, /downloads, /certs,
// /logs), so that it runs unchanged without a container when its programs
// are installed on the machine.
//
// The directories are quicbench's scratch directories bind-mounted at
// those paths in a private mount namespace: the command runs in a root of
// its own (a tmpfs holding bind mounts of the host's top-level directories
// and the four contract directories), so that nothing is created at the
// host's root and each run sees only its own files. quicbench sets that
// root up in a re-executed child of its own (Enter, `quicbench
// contract-exec`) and then executes the command.
//
// A server serves the files quicbench writes to /www; a client downloads
// the files of REQUESTS to /downloads, and quicbench checks them byte for
// byte. Exit status 127 says the testcase is not supported. A contract
// stack reports no timing of its own: its samples are timed on the wire by
// the emulator, which sees every packet (the runner's part).
package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/quicbench/quicbench/internal/safefs"
	"golang.org/x/sys/unix"
)

// Dirs are the contract's directories, as the command sees them.
const (
	WWW       = "/www"
	Downloads = "/downloads"
	Certs     = "/certs"
	Logs      = "/logs"
)

// ExitUnsupported is the exit status by which a command says that it does
// not support the testcase.
const ExitUnsupported = 127

// SpecEnv names the environment variable that carries a Spec (JSON) to the
// re-executed child that enters the contract's root (Enter).
const SpecEnv = "QUICBENCH_CONTRACT_SPEC"

// Spec is one run of a contract stack's command.
type Spec struct {
	// Command is the executable (absolute path), run with no arguments.
	Command string `json:"command"`
	// Env is the contract's environment for it (ROLE, TESTCASE, ...),
	// added to quicbench's own (PATH and the like).
	Env []string `json:"env"`
	// Root is an empty directory the child makes the command's root in.
	Root string `json:"root"`
	// Mounts are the host directories bind-mounted at the contract's
	// paths (WWW, Downloads, Certs, Logs); ReadOnly those mounted
	// read-only.
	Mounts   map[string]string `json:"mounts"`
	ReadOnly []string          `json:"read_only"`
	// NetNS, when set, is a network namespace (a /proc/PID/fd/N path)
	// the command runs in instead of its parent's.
	NetNS string `json:"netns,omitempty"`
}

// Env returns the contract's environment for role, testcase and requests
// (space-separated URLs), with the contract's key log and qlog paths.
func Env(role, testcase string, requests []string, port int) []string {
	env := []string{
		"ROLE=" + role, "TESTCASE=" + testcase,
		"SSLKEYLOGFILE=" + Logs + "/keys.log", "QLOGDIR=" + Logs + "/qlog/",
		"REQUESTS=" + strings.Join(requests, " "),
		"SERVER_PARAMS=", "CLIENT_PARAMS=",
	}
	if port > 0 {
		env = append(env, fmt.Sprintf("PORT=%d", port))
	}
	return env
}

// Command returns the command that runs spec: exe (quicbench itself)
// re-executed as `contract-exec` in a new mount namespace, which sets the
// root up and executes spec.Command (Enter).
func Command(exe string, spec Spec) (*exec.Cmd, error) {
	if !filepath.IsAbs(spec.Command) || !filepath.IsAbs(spec.Root) {
		return nil, errors.New("contract: the command and the root must be absolute paths")
	}
	for at, dir := range spec.Mounts {
		if !slices.Contains([]string{WWW, Downloads, Certs, Logs}, at) || !filepath.IsAbs(dir) {
			return nil, fmt.Errorf("contract: mount %s at %s: want an absolute directory at one of the contract's paths", dir, at)
		}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "contract-exec")
	cmd.Env = append(os.Environ(), SpecEnv+"="+string(b))
	// a mount namespace of its own (Go makes its mounts private), dying
	// with its parent
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// contractNames are the top-level names the contract's directories take
// in the command's root.
var contractNames = []string{"www", "downloads", "certs", "logs"}

// Enter sets up the command's root in this process's mount namespace
// (which must be a private one of its own: Command starts it so) and
// executes the command there; it returns only on failure. The root is a
// tmpfs at spec.Root holding bind mounts of the host's top-level
// directories (and its top-level symbolic links, recreated), and the
// contract's directories bind-mounted at /www, /downloads, /certs and
// /logs; the command starts in its own directory.
func Enter(spec Spec) error {
	fail := func(format string, args ...any) error { return fmt.Errorf("contract: "+format, args...) }
	// the namespace, the mounts and the exec on one thread: setns applies
	// to the calling thread, which the exec makes the command's
	runtime.LockOSThread()
	if spec.NetNS != "" {
		fd, err := unix.Open(spec.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail("network namespace %s: %v", spec.NetNS, err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return fail("enter the network namespace %s: %v", spec.NetNS, err)
		}
		_ = unix.Close(fd)
	}
	// The root's mounts must never be seen outside this process: refuse
	// unless this process has a mount namespace of its own (not its
	// parent's), whose mounts are private (Command's Unshareflags).
	if err := privateMountNS(); err != nil {
		return fail("%v", err)
	}
	root := spec.Root
	if err := unix.Mount("tmpfs", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
		return fail("a tmpfs for the root at %s: %v", root, err)
	}
	ents, err := os.ReadDir("/")
	if err != nil {
		return fail("%v", err)
	}
	for _, e := range ents {
		name := e.Name()
		if slices.Contains(contractNames, name) {
			continue // shadowed by the contract's own
		}
		host, at := "/"+name, filepath.Join(root, name)
		fi, err := os.Lstat(host)
		if err != nil {
			continue // gone meanwhile
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(host)
			if err != nil {
				return fail("%s: %v", host, err)
			}
			if err := os.Symlink(target, at); err != nil {
				return fail("%v", err)
			}
		case fi.IsDir():
			if err := os.Mkdir(at, 0o755); err != nil {
				return fail("%v", err)
			}
			if err := unix.Mount(host, at, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fail("bind %s: %v", host, err)
			}
		case fi.Mode().IsRegular():
			f, err := os.Create(at)
			if err != nil {
				return fail("%v", err)
			}
			_ = f.Close()
			if err := unix.Mount(host, at, "", unix.MS_BIND, ""); err != nil {
				return fail("bind %s: %v", host, err)
			}
		}
	}
	for _, path := range []string{WWW, Downloads, Certs, Logs} {
		at := filepath.Join(root, path)
		if err := os.Mkdir(at, 0o755); err != nil {
			return fail("%v", err)
		}
		dir, ok := spec.Mounts[path]
		if !ok {
			continue
		}
		if err := unix.Mount(dir, at, "", unix.MS_BIND, ""); err != nil {
			return fail("bind %s at %s: %v", dir, path, err)
		}
		if slices.Contains(spec.ReadOnly, path) {
			if err := unix.Mount("", at, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fail("%s read-only: %v", path, err)
			}
		}
	}
	if err := unix.Chroot(root); err != nil {
		return fail("chroot %s: %v", root, err)
	}
	if err := os.Chdir(filepath.Dir(spec.Command)); err != nil {
		return fail("%v", err)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, SpecEnv+"=") })
	err = unix.Exec(spec.Command, []string{spec.Command}, append(env, spec.Env...))
	return fail("exec %s: %v", spec.Command, err)
}

// privateMountNS returns nil when this process's mount namespace is its own
// (safefs.OwnMountNamespace) and its root mount propagates nothing to other namespaces
// (no "shared:" peer group in /proc/self/mountinfo).
func privateMountNS() error {
	own, err := safefs.OwnMountNamespace()
	if err != nil {
		return err
	}
	if !own {
		return errors.New("not in a mount namespace of its own (the bind mounts of the root would be the host's): refusing to set the root up")
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE ..."
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep > 6 && f[4] == "/" && strings.Contains(strings.Join(f[6:sep], " "), "shared:") {
			return errors.New("the root mount propagates to other namespaces (shared): refusing to set the root up")
		}
	}
	return nil
}
