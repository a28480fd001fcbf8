package sites

import (
	"net/url"
	"strings"
	"testing"
)

func TestBuildPage(t *testing.T) {
	s := PageShape{Name: "t", Origins: 6, Requests: 70, Bytes: 1_500_000, SharedIPs: 1, Missing: 1, Seed: 3}
	h, err := BuildPage(s)
	if err != nil {
		t.Fatal(err)
	}
	sum := h.Summarize()
	if sum.Served != 70 || sum.Origins != 6 || sum.Hosts != 6 || sum.Addresses != 5 {
		t.Fatalf("summary %+v: want 70 served, 6 origins and hosts, 5 addresses", sum)
	}
	if sum.Missing != 1 || sum.MissingBytes <= 0 {
		t.Fatalf("summary %+v: want 1 missing body", sum)
	}
	if sum.Bytes < 1_300_000 || sum.Bytes > 1_700_000 {
		t.Fatalf("page weight %d, want about 1.5 MB", sum.Bytes)
	}
	if sum.PageURL != "https://www.news.example/" {
		t.Fatalf("document %s", sum.PageURL)
	}
	encs := map[string]int{}
	queries := 0
	for _, e := range h.Log.Entries {
		for _, hd := range e.Response.Headers {
			if hd.Name == "content-encoding" {
				encs[hd.Value]++
			}
		}
		u, _ := url.Parse(e.Request.URL)
		if u.RawQuery != "" {
			queries++
		}
	}
	if encs["gzip"] == 0 || encs["br"] == 0 || queries < 5 {
		t.Fatalf("codings %v, %d URLs with a query: want gzip, br and query strings", encs, queries)
	}
	// Deterministic: the same shape gives the same archive.
	h2, _ := BuildPage(s)
	if *h2.Log.Entries[40].Response.Content.Text != *h.Log.Entries[40].Response.Content.Text {
		t.Fatal("two builds differ")
	}
}

func TestBuildPageBadShape(t *testing.T) {
	for _, s := range []PageShape{{Origins: 0, Requests: 5}, {Origins: 3, Requests: 3}, {Origins: 99, Requests: 200}} {
		if _, err := BuildPage(s); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
}

func TestChainPage(t *testing.T) {
	h, err := ChainPage(6)
	if err != nil {
		t.Fatal(err)
	}
	s := h.Summarize()
	if s.Served != 6 || s.Origins != 6 {
		t.Fatalf("%+v", s)
	}
	css, _ := h.Log.Entries[1].Response.Content.Body()
	if h.Log.Entries[1].Request.URL != "https://cdn.news.example/style.css" || !strings.Contains(string(css), "@import url(https://static.cdnhost.example/more.css)") {
		t.Fatalf("style sheet %s: %s", h.Log.Entries[1].Request.URL, css)
	}
	if _, err := ChainPage(2); err == nil {
		t.Fatal("2 origins accepted")
	}
}
