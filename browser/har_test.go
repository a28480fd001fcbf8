package browser

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/model"
)

// TestLoadHAR loads the test page over h2 and h3 and checks its HAR: one
// entry per resource the load checked, each with the protocol the check
// read (response httpVersion) and timings, the server's address, bodies
// when asked for, and page timings equal to the load's.
func TestLoadHAR(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: testObjects})
	for _, c := range []struct {
		proto, alpn string
		bodies      bool
	}{{model.ProtoH2, "h2", true}, {model.ProtoH3, "h3", false}} {
		t.Run(c.proto, func(t *testing.T) {
			res, h, err := LoadHAR(context.Background(), Options{
				URL: srv.url("/"), Protocol: c.proto, SPKIHash: srv.spki,
				ProfileDir: profileParent(t), Timeout: 20 * time.Second,
			}, c.bodies)
			if err != nil {
				t.Fatalf("LoadHAR: %v", err)
			}
			if h == nil || h.Check() != nil {
				t.Fatalf("archive %v", h)
			}
			var buf bytes.Buffer
			if err := har.Write(&buf, h); err != nil {
				t.Fatal(err)
			}
			back, err := har.Read(&buf)
			if err != nil {
				t.Fatalf("the archive does not read back: %v", err)
			}
			if len(back.Log.Entries) != len(res.Resources) {
				t.Fatalf("%d entries for %d resources", len(back.Log.Entries), len(res.Resources))
			}
			for _, e := range back.Log.Entries {
				if e.Response.HTTPVersion != c.alpn || !strings.Contains(e.Comment, "nextHopProtocol "+c.alpn) {
					t.Errorf("%s: httpVersion %q, comment %q, want the checked %s", e.Request.URL, e.Response.HTTPVersion, e.Comment, c.alpn)
				}
				if e.Response.Status != 200 || e.ServerIPAddress != "127.0.0.1" || e.Time <= 0 {
					t.Errorf("%s: status %d, server %q, time %v", e.Request.URL, e.Response.Status, e.ServerIPAddress, e.Time)
				}
				_, has := e.Response.Content.Body()
				if has != c.bodies {
					t.Errorf("%s: body kept %v, asked %v", e.Request.URL, has, c.bodies)
				}
				if e.Response.Content.Size <= 0 {
					t.Errorf("%s: content size %d", e.Request.URL, e.Response.Content.Size)
				}
			}
			pt := back.Log.Pages[0].PageTimings
			if pt.OnLoad == nil || *pt.OnLoad != float64(res.Load)/1e6 {
				t.Errorf("page onLoad %v, load %v", pt.OnLoad, res.Load)
			}
		})
	}
}
