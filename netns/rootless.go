package netns

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/forward"
)

// tunPath is the TUN clone device every testbed opens.
const tunPath = "/dev/net/tun"

// tunAccessible tells whether an ordinary user may open the TUN clone
// device at path. A user namespace gives capabilities over the namespaces
// it owns, not over device files of the host: if the node's mode does not
// let an ordinary user read and write it, rootless mode cannot work. For
// root it judges the "other" permission bits (what user nobody gets); for
// anyone else it asks the kernel (access(2)).
func tunAccessible(path string) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fmt.Errorf("%s: %w (the TUN driver is missing: modprobe tun)", path, err)
	}
	if os.Geteuid() != 0 {
		if err := unix.Access(path, unix.R_OK|unix.W_OK); err != nil {
			return fmt.Errorf("%s is mode %04o owned by uid %d: this user cannot open it (%v); chmod 0666 %s (the usual default) to allow rootless mode", path, st.Mode&0o7777, st.Uid, err, path)
		}
		return nil
	}
	if st.Mode&0o006 != 0o006 {
		return fmt.Errorf("%s is mode %04o: an ordinary user cannot open it, so rootless mode is unavailable here; chmod 0666 %s (the usual default) to allow it", path, st.Mode&0o7777, path)
	}
	return nil
}

// RootlessEnv is set (to "1") in the environment of a process re-executed
// by RootlessCommand.
const RootlessEnv = "QUICBENCH_ROOTLESS"

// InRootless reports whether this process is the re-executed child of
// RootlessCommand: root inside its own user namespace, an ordinary user
// outside.
func InRootless() bool { return os.Getenv(RootlessEnv) == "1" }

// RootlessCommand returns a command that runs exe with args inside a new
// user namespace (mapping the calling user to root) and a new network
// namespace, so that an ordinary user can build testbeds there: quicbench
// re-executes itself this way when it is not root. Differences from root
// mode: no Persist (no /run/netns), no SCHED_FIFO (Options.Realtime falls
// back), and socket buffers are capped by the host's net.core.rmem_max /
// wmem_max (SO_RCVBUFFORCE needs real root), so quic-go may warn about its
// UDP buffers. The child dies with the caller (Pdeathsig).
func RootlessCommand(ctx context.Context, exe string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), RootlessEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		Pdeathsig:   syscall.SIGKILL,
	}
	return cmd
}

// UserNamespaceSupport tells whether an unprivileged user can create user
// namespaces here and open the TUN device inside them (what rootless mode
// needs), and if not, why. It reads the kernel's switches, checks the
// permissions of /dev/net/tun and, for the calling user, really tries.
func UserNamespaceSupport() error {
	if err := tunAccessible(tunPath); err != nil {
		return err
	}
	if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
		return errors.New("kernel.unprivileged_userns_clone = 0 (Debian's switch): unprivileged user namespaces are disabled; enable with sysctl -w kernel.unprivileged_userns_clone=1")
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n == 0 {
			return errors.New("user.max_user_namespaces = 0: user namespaces are disabled; enable with sysctl -w user.max_user_namespaces=10000")
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); err == nil && strings.TrimSpace(string(b)) == "1" {
		return errors.New("kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu): AppArmor forbids unprivileged user namespaces to unconfined programs; run as root, or allow quicbench with an AppArmor profile")
	}
	// Really try, as an unprivileged user: ourselves, or nobody when root.
	true_, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("cannot probe user namespaces: %w", err)
	}
	cmd := RootlessCommand(context.Background(), true_)
	if os.Geteuid() == 0 {
		// Root may always create them; probe what an ordinary user gets
		// by dropping to nobody first and unsharing in a second step.
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			return nil // the switches above allow it; no tool to test further
		}
		cmd = exec.Command(unshare, "--user", "--map-root-user", "--net", true_)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("creating a user and network namespace as an unprivileged user failed: %v %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// quicGoBuffer is the UDP socket buffer size quic-go asks for (7 MiB); as
// root it forces it past net.core.rmem_max / wmem_max.
const quicGoBuffer = 7 << 20

// RootlessDifferences describes, for the record of a measurement taken in
// rootless mode (InRootless), how this process's testbeds differ from root
// mode's, as found here: whether the emulator threads can have SCHED_FIFO
// (only with a large enough RLIMIT_RTPRIO), and the host's socket buffer
// caps, which only real root may exceed. Each element is one sentence.
func RootlessDifferences() []string {
	var out []string
	if !realtimeAllowed() {
		out = append(out, fmt.Sprintf("no SCHED_FIFO (it needs CAP_SYS_NICE in the host's user namespace, or RLIMIT_RTPRIO >= %d): the emulator threads run on the normal scheduler, so delays are less precise on a busy machine", forward.RealtimePriority))
	}
	var caps []string
	for _, k := range []string{"net.core.rmem_max", "net.core.wmem_max"} {
		v, err := readSysctl(k)
		if err != nil {
			caps = append(caps, k+" (unreadable)")
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n < quicGoBuffer {
			caps = append(caps, k+" = "+v)
		}
	}
	if len(caps) > 0 {
		out = append(out, fmt.Sprintf("UDP socket buffers are capped by the host's %s bytes (quic-go asks for %d; only real root may exceed the cap)", strings.Join(caps, " and "), quicGoBuffer))
	}
	return out
}

// realtimeAllowed reports whether a thread of this process may switch to
// SCHED_FIFO at forward.RealtimePriority. It tries on a thread of its own,
// which is never unlocked, so the runtime ends it with its policy.
func realtimeAllowed() bool {
	ok := make(chan bool)
	go func() {
		runtime.LockOSThread()
		param := struct{ prio int32 }{forward.RealtimePriority}
		_, _, e := unix.RawSyscall(unix.SYS_SCHED_SETSCHEDULER, 0, uintptr(unix.SCHED_FIFO), uintptr(unsafe.Pointer(&param)))
		ok <- e == 0
	}()
	return <-ok
}

// HostUID returns the user outside this process's user namespace whom its
// uid maps to (in rootless mode: the user who ran quicbench), from
// /proc/self/uid_map; the uid itself if there is no mapping to read.
func HostUID() int {
	uid := os.Getuid()
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return uid
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		in, e1 := strconv.Atoi(f[0])
		out, e2 := strconv.Atoi(f[1])
		n, e3 := strconv.Atoi(f[2])
		if e1 == nil && e2 == nil && e3 == nil && uid >= in && uid-in < n {
			return out + uid - in
		}
	}
	return uid
}
