package report

import (
	"reflect"
	"testing"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/stats"
)

func TestTokenizeWarningKeepsNamesAndAddresses(t *testing.T) {
	for _, tc := range []struct{ in, shape string }{
		{"down: 12 packets dropped", "down: # packets dropped"},
		{"97% of 2 cores", "#% of # cores"},
		{"jumped by 1.25s.", "jumped by #s."},
		{"h3 via 10.1.2.2 and x_2, v1.2", "h3 via 10.1.2.2 and x_2, v1.2"},
		{"1715", "#"},
		{"", ""},
		{"ends with 7.", "ends with #."},
	} {
		if got := warningShape(tokenizeWarning(tc.in)); got != tc.shape {
			t.Errorf("shape of %q = %q, want %q", tc.in, got, tc.shape)
		}
	}
}

func TestWarningsGroupedByShape(t *testing.T) {
	cell := func(key string, warns ...[]string) *stats.CellStats {
		cs := &stats.CellStats{Cell: &model.Cell{Key: key}}
		for i, w := range warns {
			cs.Samples = append(cs.Samples, &model.Sample{Iteration: i, Warnings: w})
		}
		return cs
	}
	an := &stats.Analysis{Cells: []*stats.CellStats{
		cell("a",
			[]string{"down: the QUIC sender (server) declared 72 packets lost where the link dropped 0: the client could not keep up"},
			[]string{"down: the QUIC sender (server) declared 1715 packets lost where the link dropped 0: the client could not keep up",
				"client namespace: 37 UDP datagrams dropped"}),
		cell("b",
			[]string{"down: the QUIC sender (server) declared 300 packets lost where the link dropped 0: the client could not keep up"},
			[]string{"up: the QUIC sender (client) declared 11 packets lost where the link dropped 0: the server could not keep up"}),
	}}
	_, rows := validity(an)
	want := []warningRow{
		{Text: "down: the QUIC sender (server) declared 72–1715 packets lost where the link dropped 0: the client could not keep up", Count: 3, NCells: 2, Cells: "a (2); b (1)"},
		{Text: "client namespace: 37 UDP datagrams dropped", Count: 1, NCells: 1, Cells: "a (1)"},
		{Text: "up: the QUIC sender (client) declared 11 packets lost where the link dropped 0: the server could not keep up", Count: 1, NCells: 1, Cells: "b (1)"},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("rows:\n%+v\nwant\n%+v", rows, want)
	}
}
