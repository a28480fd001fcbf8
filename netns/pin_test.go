package netns

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
)

func TestPinLayout(t *testing.T) {
	for _, tt := range []struct {
		cpus []int
		want Pinning
	}{
		{[]int{0, 1}, Pinning{Emulator: []int{0}, Server: []int{1}, Client: []int{0}}},
		{[]int{2, 5, 7, 9}, Pinning{Emulator: []int{2}, Server: []int{5}, Client: []int{7}}},
	} {
		got, err := PinLayout(tt.cpus)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("PinLayout(%v) = %+v, %v; want %+v", tt.cpus, got, err, tt.want)
		}
	}
	if _, err := PinLayout([]int{3}); err == nil || !strings.Contains(err.Error(), "at least 2 CPUs") {
		t.Errorf("one CPU: %v", err)
	}
}

// TestPinnedCommands checks that a pinned testbed starts each side's
// commands on that side's CPUs.
func TestPinnedCommands(t *testing.T) {
	testsupport.RequireRoot(t, "needs root (network namespaces)")
	cpus, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		testsupport.Unavailable(t, "needs 2 CPUs")
	}
	tb, err := New(context.Background(), Config{Name: "qbpin", Pin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	pin, ok := tb.Pinning()
	if !ok {
		t.Fatal("not pinned")
	}
	for s, want := range map[Side][]int{Server: pin.Server, Client: pin.Client} {
		out, err := tb.Command(context.Background(), s, "grep", "Cpus_allowed_list", "/proc/self/status").Output()
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := strings.TrimSpace(strings.TrimPrefix(string(out), "Cpus_allowed_list:")); got != cpuList(want) {
			t.Errorf("%s command runs on CPUs %q, want %q", s, got, cpuList(want))
		}
	}
}
