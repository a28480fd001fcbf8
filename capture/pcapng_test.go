package capture

import (
	"bytes"
	"testing"

	"github.com/quicbench/quicbench/emu/pipeline"
	"github.com/quicbench/quicbench/forward"
)

func TestComments(t *testing.T) {
	for _, c := range []struct {
		r    forward.Record
		want string
	}{
		{forward.Record{Verdict: pipeline.Delivered, In: 1_000, At: 25_514_042 + 1_000, Delay: 25_000_000, Marks: pipeline.MarkReordered | pipeline.MarkDuplicate},
			"delivered, entered 25.514042 ms earlier: delay 25.000000 ms + queue 0.514042 ms, reordered, duplicate"},
		{forward.Record{Verdict: pipeline.Delivered, In: 5, At: 5}, "delivered, entered 0.000000 ms earlier: delay 0.000000 ms + queue 0.000000 ms"},
		{forward.Record{Verdict: pipeline.DroppedLoss, In: 7, At: 7}, "dropped by loss"},
		{forward.Record{Verdict: pipeline.DroppedQueue, In: 0, At: 5_210_000, Marks: pipeline.MarkEarly}, "dropped by queue, entered 5.210000 ms earlier, sent early by reorder"},
		{forward.Record{Verdict: pipeline.Delivered, Marks: pipeline.MarkCorrupted, In: 0, At: 1_000_000_000, Delay: 2_000_000_000}, "delivered, entered 1000.000000 ms earlier: delay 2000.000000 ms + queue 0.000000 ms, corrupted"},
		{forward.Record{Kind: forward.KindICMP}, "sent by the emulator: ICMP fragmentation needed for a packet above the link's mtu"},
	} {
		if got := string(appendComment(nil, &c.r)); got != c.want {
			t.Errorf("comment\n%q\nwant\n%q", got, c.want)
		}
	}
}

// TestEPBLayout: a packet block's lengths and padding as pcapng defines
// them: every block a multiple of 4 bytes, its length at both ends.
func TestEPBLayout(t *testing.T) {
	for _, n := range []int{0, 1, 3, 4, 5, 128} {
		for _, comment := range []string{"", "a", "dropped by loss"} {
			b := appendEPB(nil, 1, 1_700_000_000_123_456_789, 1500, bytes.Repeat([]byte{7}, n), []byte(comment))
			total := int(b[4]) | int(b[5])<<8 | int(b[6])<<16 | int(b[7])<<24
			if total != len(b) || len(b)%4 != 0 || !bytes.Equal(b[len(b)-4:], b[4:8]) {
				t.Fatalf("data %d, comment %q: %d bytes, length field %d", n, comment, len(b), total)
			}
		}
	}
}
