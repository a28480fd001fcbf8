package plan

import (
	"reflect"
	"strings"
	"testing"
)

// TestAioquicCells checks the aioquic client's cells: its five tests over
// h3 only, the rest skipped with a note, and explicit misuse refused.
func TestAioquicCells(t *testing.T) {
	p := mustParse(t, `
protocols: [h2, h3]
client: [builtin, aioquic]
scenarios: [{name: a}]
tests:
  - test: download
  - test: handshake
`)
	want := []string{
		"tests[0] (download): protocol h2 skipped for client aioquic: the aioquic client speaks only h3, not h2",
		"tests[1] (handshake): client aioquic skipped: the aioquic client runs only download, upload, ttfb, latency and multiplex tests, not handshake",
	}
	if got := p.Notes(); !reflect.DeepEqual(got, want) {
		t.Errorf("notes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cells, _ := p.Expand()
	n := 0
	for _, c := range cells {
		if c.Client == "aioquic" {
			n++
			if c.Test != TestDownload || c.Protocol != "h3" {
				t.Errorf("aioquic cell %s", c.Key)
			}
			if ld, err := CellLoad(&c); err != nil || !ld.Exclusive {
				t.Errorf("aioquic cell %s load %+v, %v: want exclusive", c.Key, ld, err)
			}
		}
	}
	if n != 1 {
		t.Errorf("%d aioquic cells, want 1", n)
	}
	for _, tc := range []struct{ plan, want string }{
		{`
scenarios: [{name: a}]
tests:
  - test: download
    client: aioquic
    protocols: [h2]
`, `tests[0].protocols[0]: "h2": the aioquic client speaks only h3, not h2`},
		{`
scenarios: [{name: a}]
tests:
  - test: stream
    client: aioquic
`, `"aioquic": the aioquic client runs only download, upload, ttfb, latency and multiplex tests, not stream`},
		{`
client: aioquic
scenarios: [{name: a}]
tests:
  - test: page
`, `no client can run page: the aioquic client runs only download, upload, ttfb, latency and multiplex tests, not page; set client: builtin`},
	} {
		_, err := Parse("plan.yaml", []byte(tc.plan))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want one containing %q", err, tc.want)
		}
	}
}
