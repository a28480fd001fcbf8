package runner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

func TestMergeSysctls(t *testing.T) {
	const rmem, wmem = "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"
	small := map[string]string{rmem: "4096 131072 16777216", wmem: "4096 16384 16777216", "net.ipv4.tcp_ecn": "2"}
	big := map[string]string{rmem: "4096 131072 25165824", wmem: "4096 16384 25165824", "net.ipv4.tcp_ecn": "2"}
	// a new run: the testbed's values
	if got, notes := mergeSysctls(nil, small); !reflect.DeepEqual(got, small) || len(notes) != 0 {
		t.Fatalf("from nothing: %v %q", got, notes)
	}
	// buffers grew for a link: the larger limits are recorded
	if got, notes := mergeSysctls(small, big); !reflect.DeepEqual(got, big) || len(notes) != 0 {
		t.Fatalf("grown: %v %q", got, notes)
	}
	// a resumed run starts with smaller buffers than its earlier samples
	// had: the larger ones stay recorded
	if got, notes := mergeSysctls(big, small); !reflect.DeepEqual(got, big) || len(notes) != 0 {
		t.Fatalf("resumed with smaller buffers: %v %q", got, notes)
	}
	// another setting changed between invocations: recorded, with a note
	other := map[string]string{rmem: "4096 131072 16777216", "net.ipv4.tcp_ecn": "1"}
	got, notes := mergeSysctls(big, other)
	want := map[string]string{rmem: "4096 131072 25165824", wmem: "4096 16384 25165824", "net.ipv4.tcp_ecn": "1"}
	if !reflect.DeepEqual(got, want) || len(notes) != 1 || !strings.Contains(notes[0], "net.ipv4.tcp_ecn") {
		t.Fatalf("changed setting: %v %q", got, notes)
	}
}

func TestCCDescription(t *testing.T) {
	cells := []model.Cell{{CC: "cubic"}, {CC: "bbr"}, {CC: "cubic"}}
	if got, want := ccDescription(cells[:1], "cubic"), "cubic (every TCP connection, by the testbed's routes; namespace default cubic)"; got != want {
		t.Errorf("one: %q, want %q", got, want)
	}
	if got, want := ccDescription(cells, "reno"), "cubic, bbr (every TCP connection, each cell's, by the testbed's routes; namespace default reno)"; got != want {
		t.Errorf("two: %q, want %q", got, want)
	}
}
