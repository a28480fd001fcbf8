package runner

import (
	"slices"
	"testing"

	"github.com/quicbench/quicbench/forward"
)

func TestForwarderWarnings(t *testing.T) {
	base := forward.Stats{PoolEmpty: 5, Oversize: 1, Malformed: 2, WriteErrors: 3, Reads: 100}
	if w := forwarderWarnings(base, base, base, base); len(w) != 0 {
		t.Errorf("unchanged counters: %q, want no warning", w)
	}
	// Counts already there before the sample are not this sample's; reads
	// and writes are not problems.
	up1, down1 := base, base
	up1.PoolEmpty += 4
	down1.PoolEmpty += 3
	down1.Oversize += 2
	up1.Malformed++
	down1.WriteErrors += 6
	up1.Reads += 1000
	got := forwarderWarnings(base, base, up1, down1)
	want := []string{
		"emulator packet pool exhausted: 7 packets dropped outside the configured impairments",
		"emulator: 2 packets larger than its buffers dropped outside the configured impairments",
		"emulator: 1 malformed offload super-packets dropped",
		"emulator: 6 packets refused by the TUN device",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
