package report

import (
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// TestCaveats: Firefox's caveat (peers/firefox/stack.yaml) applies to its
// h3 cells from quic-go servers only.
func TestCaveats(t *testing.T) {
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
		{"firefox h3 from quicbench", []*stats.Group{group("firefox", "", model.ProtoH2, model.ProtoH3)}, true},
		{"firefox h3 from caddy", []*stats.Group{group("firefox", "caddy", model.ProtoH3)}, true},
		{"firefox h3 from aioquic", []*stats.Group{group("firefox", "aioquic", model.ProtoH3)}, false},
		{"firefox h2 only", []*stats.Group{group("firefox", "quicbench", model.ProtoH2)}, false},
		{"chromium h3", []*stats.Group{group("chromium", "", model.ProtoH3)}, false},
	} {
		if got := len(caveats(&stats.TestSet{Groups: c.groups})) == 1; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestCaveatRendered: the note is in the HTML report of a run with
// Firefox over h3 from quicbench's server, and not in one without Firefox.
func TestCaveatRendered(t *testing.T) {
	b := newBuilder(3)
	spec := cellSpec{scenario: "lossy", test: "page", factors: []model.Factor{{Name: "objects", Value: "20"}}, metric: "plt_ms", unit: "ms", client: "firefox"}
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
