package runner

import (
	"maps"
	"testing"
	"time"

	"github.com/quicbench/quicbench/model"
)

func TestCPUMetricsAbsentWhenUnmeasured(t *testing.T) {
	cpu := model.CPUUsage{ClientUser: 300 * time.Millisecond, ClientSys: 100 * time.Millisecond, ServerUser: 200 * time.Millisecond}
	for _, tt := range []struct {
		name           string
		client, server bool
		ok             bool
		bytes          int64
		want           map[string]float64
	}{
		{"both", true, true, true, 2e6, map[string]float64{"cpu_client_s_per_mb": 0.2, "cpu_server_s_per_mb": 0.1, "cpu_s_per_mb": 0.3}},
		{"no server", true, false, true, 2e6, map[string]float64{"cpu_client_s_per_mb": 0.2}},
		{"no client", false, true, true, 2e6, map[string]float64{"cpu_server_s_per_mb": 0.1}},
		{"failed sample", true, true, false, 2e6, map[string]float64{}},
		{"no bytes", true, true, true, 0, map[string]float64{}},
	} {
		m := map[string]float64{}
		cpuMetrics(m, cpu, tt.bytes, tt.client, tt.server, tt.ok)
		if !maps.EqualFunc(m, tt.want, func(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }) {
			t.Errorf("%s: %v, want %v", tt.name, m, tt.want)
		}
	}
}

func TestRetransmitsCountBothSides(t *testing.T) {
	quic := func(side string, r int64) model.TransportStats {
		return model.TransportStats{Kind: "quic", Side: side, Retransmits: r}
	}
	for _, tt := range []struct {
		name  string
		ts    []model.TransportStats
		conns int
		want  float64
		ok    bool
	}{
		// a download: the server, the sender, declared 37 packets lost
		{"download", []model.TransportStats{quic("client", 0), quic("server", 37)}, 1, 37, true},
		{"two connections", []model.TransportStats{quic("client", 1), quic("client", 2), quic("server", 3), quic("server", 4)}, 2, 10, true},
		{"server stats missing", []model.TransportStats{quic("client", 0)}, 1, 0, false},
		{"client TCP_INFO unread", []model.TransportStats{quic("server", 5)}, 1, 0, false},
		{"not measured", []model.TransportStats{quic("client", 0), quic("server", model.NotMeasured)}, 1, 0, false},
		{"no connections", nil, 0, 0, false},
	} {
		m := map[string]float64{}
		transportMetrics(m, tt.ts, tt.conns)
		got, ok := m["retransmits"]
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s: retransmits %v (present %v), want %v (present %v)", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
