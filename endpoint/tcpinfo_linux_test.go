package endpoint

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/model"
)

func TestTCPInfoStats(t *testing.T) {
	info := &unix.TCPInfo{
		Rtt:           12_345, // µs
		Rttvar:        2_500,
		Min_rtt:       10_000,
		Snd_mss:       1448,
		Snd_cwnd:      10, // segments
		Snd_ssthresh:  0x7fffffff,
		Segs_out:      900,
		Lost:          3,
		Retransmits:   1, // consecutive unrecovered RTOs right now: not used
		Total_retrans: 42,
		Bytes_retrans: 60_816,
		Delivery_rate: 1_250_000, // bytes/s
		Total_rto:     2,
	}
	got := tcpInfoStats(info, "bbr")
	want := model.TransportStats{
		Kind:               "tcp",
		CongestionAlgo:     "bbr",
		SmoothedRTTms:      12.345,
		RTTVarms:           2.5,
		MinRTTms:           10,
		CwndBytes:          14_480,
		SsthreshBytes:      0, // "infinite": no loss yet
		PacketsSent:        900,
		PacketsLost:        3,
		Retransmits:        42,
		BytesRetransmitted: 60_816,
		DeliveryRateBps:    10_000_000,
		PTOCount:           2, // tcpi_total_rto, not tcpi_retransmits
	}
	if got != want {
		t.Fatalf("infinite ssthresh:\n got %+v\nwant %+v", got, want)
	}

	info.Snd_ssthresh = 20
	if got := tcpInfoStats(info, "cubic"); got.SsthreshBytes != 20*1448 {
		t.Fatalf("ssthresh 20 segments: %d bytes, want %d", got.SsthreshBytes, 20*1448)
	}
	// Values at or above 0xffff segments are the kernel's "infinite" too.
	info.Snd_ssthresh = 0xffff
	if got := tcpInfoStats(info, "cubic"); got.SsthreshBytes != 0 {
		t.Fatalf("ssthresh 0xffff segments: %d bytes, want 0", got.SsthreshBytes)
	}
}
