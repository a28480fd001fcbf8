package stats

import (
	"testing"

	"github.com/quicbench/quicbench/model"
)

func ccCell(proto, server string, algos ...model.TransportStats) *CellStats {
	s := &model.Sample{Status: model.StatusOK, Transport: algos}
	return &CellStats{Cell: &model.Cell{Protocol: proto, Server: server}, Samples: []*model.Sample{s}}
}

// TestControllers: a comparison says which controllers ran, from what the
// samples recorded, the server's side first.
func TestControllers(t *testing.T) {
	h3 := ccCell(model.ProtoH3, "", model.TransportStats{Kind: "quic", Side: "server", CongestionAlgo: "reno"},
		model.TransportStats{Kind: "quic", Side: "client", CongestionAlgo: "reno"})
	h2 := ccCell(model.ProtoH2, "", model.TransportStats{Kind: "tcp", Side: "server", CongestionAlgo: "cubic"})
	cmp := &Comparison{A: h3, B: h2}
	if got := cmp.Controllers(); got != "h3: quic-go NewReno; h2: kernel Cubic" {
		t.Errorf("controllers %q", got)
	}
	if cmp.MatchedCC() {
		t.Error("NewReno against Cubic called matched")
	}
	aio := ccCell(model.ProtoH3, "aioquic", model.TransportStats{Kind: "quic", Side: "server", CongestionAlgo: "cubic"})
	if c := (&Comparison{A: aio, B: h2}); c.Controllers() != "h3: aioquic Cubic; h2: kernel Cubic" || !c.MatchedCC() {
		t.Errorf("aioquic vs h2: %q matched %v", c.Controllers(), c.MatchedCC())
	}
	browser := ccCell(model.ProtoH3, "", model.TransportStats{Kind: "quic", Side: "client", CongestionAlgo: "cubic"})
	browser.Cell.Client = "aioquic"
	if got := browser.Controllers(); got != "aioquic Cubic" {
		t.Errorf("client side only: %q", got)
	}
	if got := (&Comparison{A: ccCell(model.ProtoH3, ""), B: ccCell(model.ProtoH2, "")}).Controllers(); got != "" {
		t.Errorf("nothing recorded: %q", got)
	}
}
