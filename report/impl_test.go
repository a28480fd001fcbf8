package report

import (
	"strings"
	"testing"
)

// A protocol measured by two clients gets a row in the implementations
// table, against quicbench's own client; a report without such cells has
// no such section.
func TestImplementationsSection(t *testing.T) {
	html := string(renderHTML(t, clientsDataset(), Options{}))
	i := strings.Index(html, `<section id="implementations">`)
	if i < 0 {
		t.Fatal("no implementations section")
	}
	sec := html[i:]
	sec = sec[:strings.Index(sec, "</section>")]
	for _, want := range []string{"Chromium → Go net/http", "Chromium → quic-go", "quic-go → quic-go", "150.0%", `<td class="n" data-l="n">6</td>`,
		`class="fig spread"`, `class="fig spread-diff"`, "protocol × implementation"} {
		if !strings.Contains(sec, want) {
			t.Errorf("implementations section lacks %q:\n%s", want, sec)
		}
	}
	// lossy objects=10 over h2 and h3: two rows; the other configurations
	// were measured by one client only.
	if n := strings.Count(sec, `<tr><td data-l="Configuration">`); n != 2 {
		t.Errorf("%d rows, want 2:\n%s", n, sec)
	}
	if strings.Contains(string(renderHTML(t, smallDataset(), Options{})), `id="implementations"`) {
		t.Error("a single-implementation report has an implementations section")
	}
}
