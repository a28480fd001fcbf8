package report

import (
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

func TestFirefoxH3Note(t *testing.T) {
	group := func(client, server string, protos ...string) *stats.Group {
		g := &stats.Group{Client: client, Server: server}
		for _, p := range protos {
			g.Cells = append(g.Cells, &stats.CellStats{Cell: &model.Cell{Protocol: p, Client: client, Server: server}})
		}
		return g
	}
	for _, c := range []struct {
		name   string
		groups []*stats.Group
		want   bool
	}{
		{"firefox h3 from quicbench", []*stats.Group{group(model.ClientFirefox, "", model.ProtoH2, model.ProtoH3)}, true},
		{"firefox h3 from caddy", []*stats.Group{group(model.ClientFirefox, model.ServerCaddy, model.ProtoH3)}, true},
		{"firefox h3 from aioquic", []*stats.Group{group(model.ClientFirefox, model.ServerAioquic, model.ProtoH3)}, false},
		{"firefox h2 only", []*stats.Group{group(model.ClientFirefox, model.ServerQuicbench, model.ProtoH2)}, false},
		{"chromium h3", []*stats.Group{group(model.ClientChromium, "", model.ProtoH3)}, false},
	} {
		if got := firefoxH3(&stats.TestSet{Groups: c.groups}); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestFirefoxH3NoteRendered: the note is in the HTML report of a run with
// Firefox over h3 from quicbench's server, and not in one without Firefox.
func TestFirefoxH3NoteRendered(t *testing.T) {
	b := newBuilder(3)
	spec := cellSpec{scenario: "lossy", test: "page", factors: []model.Factor{{Name: "objects", Value: "20"}}, metric: "plt_ms", unit: "ms", client: model.ClientFirefox}
	for k, proto := range []string{"h2", "h3"} {
		v := 100 + 10*float64(k)
		b.add(spec, proto, 6, func(int) float64 { return v }, nil)
	}
	const note = "Firefox over HTTP/3 from quic-go"
	if html := string(renderHTML(t, b.ds, Options{})); !strings.Contains(html, note) {
		t.Error("the HTML report of a Firefox h3 run lacks the note on Firefox samples")
	}
	if html := string(renderHTML(t, smallDataset(), goldenOpts())); strings.Contains(html, note) {
		t.Error("the note on Firefox samples is in a report without Firefox")
	}
}
