package endpoint

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"

	"github.com/quicbench/quicbench/model"
)

// tcpStats reads TCP_INFO and TCP_CONGESTION of c's socket. Call it before
// the socket is closed.
func tcpStats(c *net.TCPConn) (model.TransportStats, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return model.TransportStats{}, err
	}
	var info *unix.TCPInfo
	var cc string
	var serr error
	err = rc.Control(func(fd uintptr) {
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if serr != nil {
			return
		}
		cc, serr = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return model.TransportStats{}, fmt.Errorf("TCP_INFO: %w", err)
	}
	return tcpInfoStats(info, cc), nil
}

// TCPInfoStats maps the kernel's tcp_info of a socket running congestion
// control cc to TransportStats (see docs/metrics.md for each field). The
// runner uses it for the sockets of peers that do not report their own,
// as socket diagnostics (internal/sockdiag) read them.
func TCPInfoStats(info *unix.TCPInfo, cc string) model.TransportStats { return tcpInfoStats(info, cc) }

// tcpInfoStats maps the kernel's tcp_info to TransportStats (see
// docs/metrics.md for each field).
func tcpInfoStats(info *unix.TCPInfo, cc string) model.TransportStats {
	mss := int64(info.Snd_mss)
	ts := model.TransportStats{
		Kind:               "tcp",
		CongestionAlgo:     cc,
		SmoothedRTTms:      float64(info.Rtt) / 1000,
		RTTVarms:           float64(info.Rttvar) / 1000,
		MinRTTms:           float64(info.Min_rtt) / 1000,
		CwndBytes:          int64(info.Snd_cwnd) * mss,
		PacketsSent:        int64(info.Segs_out),
		PacketsLost:        int64(info.Lost),
		Retransmits:        int64(info.Total_retrans),
		BytesRetransmitted: int64(info.Bytes_retrans),
		DeliveryRateBps:    int64(info.Delivery_rate) * 8,
		PTOCount:           int64(info.Total_rto),
	}
	// The kernel reports an "infinite" ssthresh (no loss yet) as
	// TCP_INFINITE_SSTHRESH = 0x7fffffff; anything at or above 0xffff
	// segments is treated as that.
	if info.Snd_ssthresh < 0xffff {
		ts.SsthreshBytes = int64(info.Snd_ssthresh) * mss
	}
	return ts
}
