package report

import (
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

// clientsDataset has one page configuration loaded by both clients over h2
// and h3 (Chromium slower by a known amount), one that only the built-in
// client ran, and a Chromium configuration with other parameters.
func clientsDataset() *model.Dataset {
	b := newBuilder(3)
	page := []model.Factor{{Name: "objects", Value: "10"}, {Name: "size", Value: "20KB"}}
	for _, c := range []struct {
		scenario, client string
		factors          []model.Factor
		base             float64
	}{
		{"lossy", model.ClientBuiltin, page, 100},
		{"lossy", "chromium", page, 250},
		{"baseline", model.ClientBuiltin, page, 10},
		{"lossy", "chromium", []model.Factor{{Name: "objects", Value: "5"}, {Name: "size", Value: "20KB"}}, 80},
	} {
		spec := cellSpec{scenario: c.scenario, test: "page", factors: c.factors, metric: "plt_ms", unit: "ms", client: c.client}
		for k, proto := range []string{"h2", "h3"} {
			v := c.base + 10*float64(k)
			b.add(spec, proto, 6, func(int) float64 { return v }, nil)
		}
	}
	return b.ds
}

func TestClientTables(t *testing.T) {
	ds := clientsDataset()
	an, err := stats.Analyze(ds, stats.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var page *stats.TestSet
	for i := range an.Tests {
		if an.Tests[i].Name == "page" {
			page = an.Tests[i]
		}
	}
	if page == nil {
		t.Fatal("no page test in the analysis")
	}
	tables := clientTables(page)
	if len(tables) != 1 {
		t.Fatalf("%d tables, want 1 (only lossy objects=10 was run by both clients): %+v", len(tables), tables)
	}
	ct := tables[0]
	if ct.Unit != "ms" || len(ct.Rows) != 2 {
		t.Fatalf("table %+v", ct)
	}
	want := []clientRow{
		{Proto: "h2", Builtin: num(100), Browser: num(250), NBuiltin: 6, NOther: 6, Diff: signed(150), Ratio: num(2.5)},
		{Proto: "h3", Builtin: num(110), Browser: num(260), NBuiltin: 6, NOther: 6, Diff: signed(150), Ratio: num(260.0 / 110)},
	}
	for i, w := range want {
		if ct.Rows[i] != w {
			t.Errorf("row %d = %+v, want %+v", i, ct.Rows[i], w)
		}
	}
	html := string(renderHTML(t, ds, Options{}))
	if !strings.Contains(html, "Built-in client vs headless browsers") || !strings.Contains(html, "<td class=\"n\">&#43;150</td>") {
		t.Error("the HTML report lacks the client comparison table")
	}
	// Without Chromium cells there is no such section.
	if html := string(renderHTML(t, smallDataset(), goldenOpts())); strings.Contains(html, "Built-in client vs headless browsers") {
		t.Error("client comparison drawn for a run without Chromium")
	}
}
