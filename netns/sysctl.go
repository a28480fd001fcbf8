package netns

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/model"
)

// Socket buffer sizing.
const (
	// assumedRateBps stands in for the rate of a link without a rate limit:
	// about what the emulator can carry, so that buffers never cap TCP below it.
	assumedRateBps = 10_000_000_000
	// minBufferMax is the least tcp_rmem/tcp_wmem maximum a testbed sets.
	minBufferMax = 16 << 20
	// maxBufferMax bounds the maximum (the kernel takes an int).
	maxBufferMax = 1 << 30
	// wireMTU is the packet size used to turn a queue limit in packets into bytes.
	wireMTU = 1500
)

// bufferMax is the tcp_rmem/tcp_wmem maximum for a path whose bottleneck
// rate is rateBps (0: unlimited), whose round-trip propagation delay (both
// directions' worst case) is rtt and whose queues can hold queueBytes: twice
// the bandwidth-delay product including a full queue, at least minBufferMax.
func bufferMax(rateBps uint64, rtt time.Duration, queueBytes uint64) int {
	if rateBps == 0 {
		rateBps = assumedRateBps
	}
	bdp := float64(rateBps)/8*rtt.Seconds() + float64(queueBytes)
	v := 2 * bdp
	switch {
	case v < minBufferMax:
		return minBufferMax
	case v > maxBufferMax:
		return maxBufferMax
	}
	// Round up to a whole MiB, for readable records.
	return (int(v) + 1<<20 - 1) &^ (1<<20 - 1)
}

// BufferSysctls are the sysctls whose value is a "min default max" triple
// that a testbed raises when its link needs bigger socket buffers (see
// Testbed.Sysctls).
var BufferSysctls = []string{sysRmem, sysWmem}

// The sysctls a testbed writes in both namespaces. Each one was verified to
// be per network namespace on Linux 6.x (written inside a namespace, the
// host's value did not change); TestSysctlsArePerNamespace re-checks it.
// net.core.rmem_max/wmem_max are global (read-only inside a namespace), so
// they are only recorded: quic-go, running as root, raises its UDP buffers
// with SO_RCVBUFFORCE/SO_SNDBUFFORCE, which ignore them.
const (
	sysCC           = "net.ipv4.tcp_congestion_control"
	sysRmem         = "net.ipv4.tcp_rmem"
	sysWmem         = "net.ipv4.tcp_wmem"
	sysNoMetrics    = "net.ipv4.tcp_no_metrics_save"
	sysIPv6All      = "net.ipv6.conf.all.disable_ipv6"
	sysIPv6Default  = "net.ipv6.conf.default.disable_ipv6"
	tcpRmemMin      = 4096
	tcpRmemDefault  = 131072
	tcpWmemMin      = 4096
	tcpWmemDefault  = 16384
	defaultCC       = model.DefaultCC
	ccAvailablePath = "/proc/sys/net/ipv4/tcp_available_congestion_control"
)

// recordedSysctls are read (not written) and recorded with the applied ones,
// because they shape what is measured.
var recordedSysctls = []string{
	"net.core.rmem_max",
	"net.core.wmem_max",
	"net.ipv4.tcp_ecn",
	"net.ipv4.tcp_sack",
	"net.ipv4.tcp_timestamps",
	"net.ipv4.tcp_slow_start_after_idle",
}

func sysctlPath(key string) string { return "/proc/sys/" + strings.ReplaceAll(key, ".", "/") }

// readSysctl reads key in the calling thread's network namespace,
// normalising whitespace to single spaces.
func readSysctl(key string) (string, error) {
	b, err := os.ReadFile(sysctlPath(key))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", key, err)
	}
	return strings.Join(strings.Fields(string(b)), " "), nil
}

// writeSysctl writes key in the calling thread's network namespace and
// returns the value read back.
func writeSysctl(key, value string) (string, error) {
	f, err := os.OpenFile(sysctlPath(key), os.O_WRONLY, 0)
	if err != nil {
		return "", fmt.Errorf("sysctl %s: %w", key, err)
	}
	_, werr := f.WriteString(value)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("sysctl %s=%q: %w", key, value, werr)
	}
	return readSysctl(key)
}

func bufferTriple(min, def, max int) string {
	return strconv.Itoa(min) + " " + strconv.Itoa(def) + " " + strconv.Itoa(max)
}

// checkCC reports whether cc is a known and available congestion control.
func checkCC(cc string) error {
	if !slices.Contains(model.CongestionControls, cc) {
		return fmt.Errorf("unknown congestion control %q (want one of %s)", cc, strings.Join(model.CongestionControls, ", "))
	}
	avail, err := os.ReadFile(ccAvailablePath)
	if err != nil {
		return fmt.Errorf("reading available congestion controls: %w", err)
	}
	for _, a := range strings.Fields(string(avail)) {
		if a == cc {
			return nil
		}
	}
	return fmt.Errorf("congestion control %q is not available in this kernel (available: %s); load it with `modprobe tcp_%s`",
		cc, strings.TrimSpace(string(avail)), cc)
}
