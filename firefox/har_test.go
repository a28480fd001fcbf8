package firefox

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/model"
)

// TestLoadHAR loads a page of 4 objects over h3 and h2 and checks its HAR:
// one entry per resource the load checked, each with the protocol the
// check read, a status, a size and timings; it reads back as a HAR.
func TestLoadHAR(t *testing.T) {
	requireFirefox(t)
	base, ca := loopServer(t)
	profiles := t.TempDir()
	for _, proto := range []string{model.ProtoH3, model.ProtoH2} {
		t.Run(proto, func(t *testing.T) {
			res, h, err := LoadHAR(context.Background(), Options{Protocol: proto, URL: base + "/page/4/2KB", CAPEM: ca,
				ProfileDir: profiles, DisableCache: true, Timeout: 30 * time.Second, StartTimeout: 90 * time.Second})
			if err != nil {
				t.Fatalf("LoadHAR: %v", err)
			}
			var buf bytes.Buffer
			if err := har.Write(&buf, h); err != nil {
				t.Fatal(err)
			}
			back, err := har.Read(&buf)
			if err != nil {
				t.Fatalf("the archive does not read back: %v", err)
			}
			if len(back.Log.Entries) != len(res.Resources) || len(res.Resources) != 5 {
				t.Fatalf("%d entries for %d resources, want 5", len(back.Log.Entries), len(res.Resources))
			}
			for _, e := range back.Log.Entries {
				if e.Response.HTTPVersion != proto || !strings.Contains(e.Comment, "nextHopProtocol "+proto) {
					t.Errorf("%s: httpVersion %q, comment %q, want the checked %s", e.Request.URL, e.Response.HTTPVersion, e.Comment, proto)
				}
				if e.Response.Status != 200 || e.Response.Content.Size <= 0 || e.Time < 0 {
					t.Errorf("%s: status %d, size %d, time %v", e.Request.URL, e.Response.Status, e.Response.Content.Size, e.Time)
				}
			}
		})
	}
}
