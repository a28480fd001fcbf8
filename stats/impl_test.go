package stats

import (
	"testing"

	"github.com/quicbench/quicbench/model"
)

// Cells that differ only by server form one implementation set per
// protocol, with quicbench's own client and server as the reference, and
// a server that is slower in every pair is found slower.
func TestImplementationSets(t *testing.T) {
	ds := &model.Dataset{}
	id := int64(1)
	add := func(proto, server string, scale float64) {
		key := "s/download/" + proto + "/builtin/cubic"
		group := "s/download/builtin/cubic"
		if server != model.ServerQuicbench {
			key += "/" + server
			group += "/" + server
		}
		ds.Cells = append(ds.Cells, model.Cell{ID: id, Key: key, Group: group, Scenario: "s", Test: "download",
			Protocol: proto, Client: model.ClientBuiltin, Server: server, CC: "cubic", Metric: "time", Unit: "ms"})
		for i := range 12 {
			base := 100 * (1 + 0.5*float64(i%4))
			ds.Samples = append(ds.Samples, model.Sample{ID: id*100 + int64(i), CellID: id, Iteration: i,
				Seed: uint64(7 + i), Status: model.StatusOK, Value: base * scale})
		}
		id++
	}
	add("h2", "caddy", 1)                   // plan order: caddy's first
	add("h3", "aioquic", 1.6)               // aioquic 60% slower
	add("h3", model.ServerQuicbench, 1)     // the reference, not first
	add("h2", model.ServerQuicbench, 1.001) // caddy ties
	add("h3", "caddy", 1)
	an, err := Analyze(ds, Default())
	if err != nil {
		t.Fatal(err)
	}
	if len(an.Implementations) != 2 {
		t.Fatalf("%d implementation sets, want 2 (h2, h3)", len(an.Implementations))
	}
	var h3 *ImplSet
	for _, s := range an.Implementations {
		if s.Cells[0].Cell.Server != model.ServerQuicbench {
			t.Errorf("%s: reference is %s, want quicbench's server", s.Protocol, StackName(s.Cells[0].Cell))
		}
		if len(s.Comparisons) != len(s.Cells)-1 {
			t.Errorf("%s: %d comparisons for %d cells", s.Protocol, len(s.Comparisons), len(s.Cells))
		}
		if s.Protocol == "h3" {
			h3 = s
		}
	}
	if h3 == nil || len(h3.Cells) != 3 {
		t.Fatalf("h3 set %+v, want 3 cells", h3)
	}
	for i, cmp := range h3.Comparisons {
		if cmp.Family != ScopeImplementations || cmp.FamilySize != 3 {
			t.Errorf("comparison %d: family %q of %d, want %q of 3", i, cmp.Family, cmp.FamilySize, ScopeImplementations)
		}
		want := Negligible // Caddy serves as fast as quicbench's server: within ±5%
		if cmp.A.Cell.Server == "aioquic" {
			want = BBetter
		}
		if cmp.Verdict != want {
			t.Errorf("%s vs %s: verdict %v, want %v", StackName(cmp.A.Cell), StackName(cmp.B.Cell), cmp.Verdict, want)
		}
	}
	if got := StackName(h3.Cells[1].Cell); got != "quic-go → aioquic" {
		t.Errorf("stack name %q", got)
	}
	// The protocol comparisons stay within one server.
	for _, g := range an.Groups {
		for _, c := range g.Cells {
			if c.Cell.Server != g.Cells[0].Cell.Server {
				t.Errorf("group %s mixes servers", g.Key)
			}
		}
	}
}
