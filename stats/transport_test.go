package stats

import (
	"math"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// A QUIC connection traced without events reports its PTO count as
// model.NotMeasured: the summary leaves it out (NaN, shown as missing)
// instead of averaging -1 or 0 in; a measured count is kept.
func TestTransportSummaryNotMeasured(t *testing.T) {
	untraced := &model.Sample{Transport: []model.TransportStats{{Kind: "quic", Retransmits: 4, PacketsLost: 4, PTOCount: model.NotMeasured}}}
	traced := &model.Sample{Transport: []model.TransportStats{{Kind: "quic", Retransmits: 2, PacketsLost: 2, PTOCount: 3}}}
	if s := summarizeTransport([]*model.Sample{untraced}); !math.IsNaN(s.PTOs) || s.Retransmits != 4 {
		t.Errorf("untraced: PTOs %v (want NaN), retransmits %v", s.PTOs, s.Retransmits)
	}
	if s := summarizeTransport([]*model.Sample{untraced, traced}); s.PTOs != 3 || s.Retransmits != 3 {
		t.Errorf("mixed: PTOs %v (want 3, the measured one), retransmits %v (want 3)", s.PTOs, s.Retransmits)
	}
}
