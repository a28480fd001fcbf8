package contract

import (
	"strings"
	"testing"
)

// A process that shares its parent's mount namespace (this test, started
// by go test) must not set a root up: its bind mounts would be the host's.
func TestEnterRefusesTheParentsMountNamespace(t *testing.T) {
	err := privateMountNS()
	if err == nil || !strings.Contains(err.Error(), "not in a mount namespace of its own") {
		t.Fatalf("privateMountNS() = %v, want a refusal", err)
	}
	if err := Enter(Spec{Command: "/bin/true", Root: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "refusing to set the root up") {
		t.Fatalf("Enter in the parent's mount namespace: %v, want a refusal", err)
	}
}
