package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/peers"
)

func init() { Register("doctor", newDoctorCmd) }

// Check statuses.
const (
	checkOK   = "ok"
	checkWarn = "warn" // works, with a limitation
	checkFail = "fail" // a mode or feature is unavailable
	checkInfo = "info"
)

type doctorCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

type doctorReport struct {
	Mode     string        `json:"mode"` // "root", "rootless" or "" (none)
	Root     bool          `json:"root_mode"`
	Rootless bool          `json:"rootless_mode"`
	Why      string        `json:"why,omitempty"` // why no mode is available
	Checks   []doctorCheck `json:"checks"`
}

func newDoctorCmd(env *Env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor [--json]",
		Short: "Check what this machine allows: root or rootless mode, TUN, namespaces, congestion controls, and every stack of the registry",
		Long: `doctor checks everything quicbench needs and says which mode is available:
root mode (network namespaces, TUN devices, real-time emulator threads) or rootless mode (the
same inside an unprivileged user namespace, for quicbench emulate, calibrate and run) and, if neither, why not.
As root it builds and removes a real testbed. It exits 0 when the mode for the current user is
available and 3 when it is not.`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		r := runDoctor(cmd.Context())
		if asJSON {
			writeJSONLine(env.Stdout, r)
		} else {
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			for _, c := range r.Checks {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, c.Detail)
			}
			tw.Flush()
			switch r.Mode {
			case "root":
				fmt.Fprintln(env.Stdout, "mode: root — quicbench can build testbeds")
			case "rootless":
				fmt.Fprintln(env.Stdout, "mode: rootless — quicbench re-executes itself in a user namespace (emulate, calibrate, run; testbed up needs root)")
			default:
				fmt.Fprintf(env.Stdout, "mode: none — %s\n", r.Why)
			}
		}
		if r.Mode == "" {
			return &ExitError{Code: ExitEnv, Err: fmt.Errorf("no usable mode: %s", r.Why), Hint: "run quicbench as root, or enable unprivileged user namespaces"}
		}
		return nil
	}
	return cmd
}

func runDoctor(ctx context.Context) doctorReport {
	var r doctorReport
	add := func(name, status, format string, a ...any) {
		r.Checks = append(r.Checks, doctorCheck{name, status, fmt.Sprintf(format, a...)})
	}
	root := os.Geteuid() == 0
	if root {
		add("privileges", checkOK, "running as root")
	} else if netns.InRootless() {
		add("privileges", checkOK, "root inside a user namespace (rootless re-execution)")
		root = true
	} else {
		add("privileges", checkInfo, "not root (uid %d): root mode unavailable, rootless mode checked below", os.Getuid())
	}

	tunOK := false
	if fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		add("/dev/net/tun", checkFail, "%v: load the tun module (modprobe tun) or, in a container, pass the device (--device /dev/net/tun)", err)
	} else {
		unix.Close(fd)
		tunOK = true
		add("/dev/net/tun", checkOK, "present and openable")
	}

	nsenterOK := false
	if p, err := exec.LookPath("nsenter"); err != nil {
		add("nsenter", checkFail, "not found: commands cannot be started inside namespaces; install util-linux")
	} else {
		nsenterOK = true
		add("nsenter", checkOK, "%s", p)
	}
	if p, err := exec.LookPath("ip"); err != nil {
		add("ip (iproute2)", checkWarn, "not found: only needed to enter testbeds with `ip netns exec` (quicbench testbed exec works without)")
	} else {
		add("ip (iproute2)", checkOK, "%s (ip netns exec qb-NAME-c CMD enters a testbed)", p)
	}

	avail := readProc("/proc/sys/net/ipv4/tcp_available_congestion_control")
	allowed := readProc("/proc/sys/net/ipv4/tcp_allowed_congestion_control")
	for _, cc := range model.CongestionControls {
		switch {
		case !hasWord(avail, cc):
			add("congestion control "+cc, checkFail, "not available (available: %s): modprobe tcp_%s", avail, cc)
		case !hasWord(allowed, cc):
			add("congestion control "+cc, checkWarn, "available, but not in net.ipv4.tcp_allowed_congestion_control (%s): a namespace cannot "+
				"default to it, so it applies to sockets that select it (quicbench's endpoints do). To make it the default for any tool: "+
				"sysctl -w net.ipv4.tcp_allowed_congestion_control=\"%s %s\" (host-wide)", allowed, allowed, cc)
		default:
			add("congestion control "+cc, checkOK, "available and allowed as a namespace default")
		}
	}

	if root {
		if !tunOK || !nsenterOK {
			r.Why = "root mode needs /dev/net/tun and nsenter (see above)"
		} else {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			tb, err := netns.New(pctx, netns.Config{Name: "doctor" + strconv.Itoa(os.Getpid())})
			cancel()
			if err != nil {
				add("testbed", checkFail, "building a test testbed failed: %v", err)
				r.Why = "a testbed cannot be built: " + err.Error()
			} else {
				out, cerr := tb.Command(ctx, netns.Client, "true").CombinedOutput()
				up, _ := tb.ForwarderStats()
				offl := tb.Offloads()
				tb.Close()
				if cerr != nil {
					add("testbed", checkFail, "a command inside the client namespace failed: %v %s", cerr, out)
					r.Why = "commands cannot run inside namespaces"
				} else {
					add("testbed", checkOK, "built a client/server namespace pair with TUN devices and removed it")
					r.Root = !netns.InRootless()
					r.Rootless = netns.InRootless()
				}
				if up.Realtime {
					add("real-time emulator threads", checkOK, "SCHED_FIFO granted: precise delays on a busy machine")
				} else {
					add("real-time emulator threads", checkWarn, "SCHED_FIFO refused (needs CAP_SYS_NICE or an RLIMIT_RTPRIO): delay precision suffers when the CPUs are busy")
				}
				if len(offl) > 0 {
					add("TUN offloads", checkOK, "%s: the emulator moves up to 64 KB per system call", strings.Join(offl, ", "))
				} else {
					add("TUN offloads", checkWarn, "unavailable: one system call per wire packet (about 2 Gbit/s at most)")
				}
			}
		}
	}

	if err := netns.UserNamespaceSupport(); err != nil {
		add("rootless mode", checkFail, "%v", err)
		if !root && r.Why == "" {
			r.Why = "not root, and " + err.Error()
		}
	} else {
		detail := "unprivileged user namespaces are allowed: an ordinary user can run quicbench emulate, calibrate and run (rootless)"
		if rmem := readProc("/proc/sys/net/core/rmem_max"); rmem != "" {
			if n, _ := strconv.Atoi(rmem); n < 7<<20 {
				detail += fmt.Sprintf("; rootless UDP buffers are capped by net.core.rmem_max = %d (< 7 MB quic-go wants), so quic-go will warn", n)
			}
		}
		add("rootless mode", checkOK, "%s", detail)
		if !root {
			if tunOK && nsenterOK {
				r.Rootless = true
			} else {
				r.Why = "rootless mode needs /dev/net/tun and nsenter (see above)"
			}
		}
	}

	// Every stack of the registry but quicbench's own, each role it has:
	// its check finds and tries its programs.
	for _, st := range peers.All() {
		if st.Name == peers.Own {
			continue
		}
		for _, role := range st.Roles() {
			name := st.Name
			if role == peers.RoleClient {
				name = st.ClientName()
			}
			name += " " + role
			v, detail, err := peers.Check(peers.Deep(ctx), st, role)
			if err != nil {
				add(name, checkWarn, "%v: cells with the %s are unavailable (%s)", err, name, st.Install)
				continue
			}
			add(name, checkOK, "%s", strings.TrimSpace(strings.Join([]string{v, detail}, " ")))
		}
	}
	add("netem", checkInfo, "not needed: quicbench emulates the link in userspace")

	switch {
	case r.Root:
		r.Mode = "root"
	case r.Rootless:
		r.Mode = "rootless"
	case r.Why == "":
		r.Why = "no mode could be verified"
	}
	return r
}

func readProc(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func hasWord(list, w string) bool {
	for _, f := range strings.Fields(list) {
		if f == w {
			return true
		}
	}
	return false
}
