package workload

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/har"
)

// plainPage loads without recording.
type plainPage struct{ loads int }

func (p *plainPage) Load(context.Context, string) (*browser.Result, error) {
	p.loads++
	return &browser.Result{}, nil
}
func (p *plainPage) Bench(context.Context, string, string) ([]byte, error) { return nil, nil }

// recordingPage records each load as a HAR naming it.
type recordingPage struct{ plainPage }

func (p *recordingPage) LoadHAR(_ context.Context, url string, bodies bool) (*browser.Result, *har.HAR, error) {
	p.loads++
	h := &har.HAR{Log: har.Log{Version: "1.2", Pages: []har.Page{{ID: "page_1", Title: url + "#" + string(rune('0'+p.loads))}}}}
	return &browser.Result{}, h, nil
}

// A sample with a HAR file gets its last load's HAR written there; a
// browser that cannot record says so; no file asked, nothing changes.
func TestRecordHAR(t *testing.T) {
	f := filepath.Join(t.TempDir(), "page.har")
	rp := &recordingPage{}
	p, done := recordHAR(Request{HARFile: f}, rp)
	for range 2 { // a warm sample: the priming load, then the measured one
		if _, err := p.Load(context.Background(), "https://x/page"); err != nil {
			t.Fatal(err)
		}
	}
	if err := done(); err != nil {
		t.Fatal(err)
	}
	var h har.HAR
	b, _ := os.ReadFile(f)
	if err := json.Unmarshal(b, &h); err != nil || len(h.Log.Pages) != 1 || h.Log.Pages[0].Title != "https://x/page#2" {
		t.Fatalf("HAR %s (%v): want the second load's", b, err)
	}

	plain := &plainPage{}
	p, done = recordHAR(Request{HARFile: filepath.Join(t.TempDir(), "x.har"), Client: "somebrowser"}, plain)
	if _, err := p.Load(context.Background(), "https://x/"); err != nil || plain.loads != 1 {
		t.Fatalf("load through a browser that cannot record: %v", err)
	}
	if err := done(); err == nil || !strings.Contains(err.Error(), "somebrowser's browser cannot record") {
		t.Errorf("done = %v", err)
	}

	p, done = recordHAR(Request{}, plain)
	if p != PageSession(plain) || done() != nil {
		t.Error("no HAR file asked, yet the session was wrapped")
	}
}
