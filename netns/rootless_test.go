package netns

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
)

func TestTunAccessible(t *testing.T) {
	dir := t.TempDir()
	if err := tunAccessible(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "modprobe tun") {
		t.Errorf("missing device: got %v, want an error naming the missing driver", err)
	}
	open := filepath.Join(dir, "open")
	closed := filepath.Join(dir, "closed")
	for path, mode := range map[string]os.FileMode{open: 0o666, closed: 0o600} {
		if err := os.WriteFile(path, nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // not subject to umask
			t.Fatal(err)
		}
	}
	if err := tunAccessible(open); err != nil {
		t.Errorf("mode 0666: %v", err)
	}
	err := tunAccessible(closed)
	if err == nil {
		t.Fatal("mode 0600: accepted, want a refusal (an ordinary user cannot open it)")
	}
	if !strings.Contains(err.Error(), "0600") || !strings.Contains(err.Error(), "chmod 0666") {
		t.Errorf("mode 0600: %q should name the mode and the fix", err)
	}
}

// TestRootlessDifferences checks the record of rootless mode's differences
// in this process: SCHED_FIFO is named exactly when a thread cannot get
// it, and the socket buffer caps when the host's are below quic-go's 7 MiB.
func TestRootlessDifferences(t *testing.T) {
	diffs := strings.Join(RootlessDifferences(), "\n")
	if got, want := strings.Contains(diffs, "no SCHED_FIFO"), !realtimeAllowed(); got != want {
		t.Errorf("SCHED_FIFO named %v, want %v:\n%s", got, want, diffs)
	}
	v, err := readSysctl("net.core.rmem_max")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(v); (n < quicGoBuffer) != strings.Contains(diffs, "net.core.rmem_max = "+v) {
		t.Errorf("net.core.rmem_max = %s and the record says:\n%s", v, diffs)
	}
}

// TestHostUID checks the uid this process maps to outside its user
// namespace: itself under the identity mapping (the host's namespace).
func TestHostUID(t *testing.T) {
	b, err := os.ReadFile("/proc/self/uid_map")
	if err != nil || strings.Join(strings.Fields(string(b)), " ") != "0 0 4294967295" {
		testsupport.Unavailable(t, "not in the host's user namespace: uid_map %q, %v", b, err)
	}
	if got := HostUID(); got != os.Getuid() {
		t.Errorf("HostUID() = %d in the host's user namespace, want %d", got, os.Getuid())
	}
}
