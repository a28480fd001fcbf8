package netns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
