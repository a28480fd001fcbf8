package browser

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/model"
)

// TestContextIsolation: what one browser context learns stays in it. In a
// context of a browser that discovers HTTP/3 through Alt-Svc, with the
// HTTP cache on, a second load uses h3 for the document and takes the
// (cacheable) images from the cache: the controls that show both kinds of
// state exist. A second context of the same browser starts from nothing:
// its first load fetches the document over h2 again (no Alt-Svc entry) on
// a new connection, and every image from the server (no cache entry).
func TestContextIsolation(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: testObjects, altSvc: true})
	ctx := context.Background()
	opts := Options{URL: srv.url("/"), Protocol: model.ProtoH3, AltSvcDiscovery: true, SPKIHash: srv.spki, ProfileDir: profileParent(t)}
	s, err := NewSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	first := func(c *Context, name string) *Result {
		t.Helper()
		res, err := c.Load(ctx, srv.url("/"))
		var mm *ProtocolMismatchError
		if !errors.As(err, &mm) || res == nil {
			t.Fatalf("%s: first load: %v, want the document over h2 (*ProtocolMismatchError)", name, err)
		}
		if res.Resources[0].Protocol != "h2" {
			t.Errorf("%s: first load: document over %q, want h2: an Alt-Svc entry was known", name, res.Resources[0].Protocol)
		}
		if res.CachedResources != 0 || res.ConnectionReused {
			t.Errorf("%s: first load: %d resources from the cache, connection reused %v", name, res.CachedResources, res.ConnectionReused)
		}
		return res
	}

	a, err := s.NewContext(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	first(a, "context A")
	res, err := a.Load(ctx, srv.url("/"))
	if res == nil {
		t.Fatalf("context A: second load: %v", err)
	}
	if res.Resources[0].Protocol != "h3" || res.CachedResources == 0 {
		t.Fatalf("context A: second load: document over %q, %d resources cached; want h3 and the images from the cache (the controls)", res.Resources[0].Protocol, res.CachedResources)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	tcp0, _, _ := srv.conns()
	objects0 := srv.requests("HTTP/2.0") + srv.requests("HTTP/3.0")
	b, err := s.NewContext(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	first(b, "context B")
	tcp1, _, _ := srv.conns()
	if tcp1 <= tcp0 {
		t.Errorf("context B: the server accepted no new TCP connection (%d before, %d after)", tcp0, tcp1)
	}
	if got := srv.requests("HTTP/2.0") + srv.requests("HTTP/3.0") - objects0; got != testObjects+1 {
		t.Errorf("context B: the server saw %d requests, want %d (the document and every image)", got, testObjects+1)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// A closed context refuses loads; the session still serves new ones.
	if _, err := b.Load(ctx, srv.url("/")); err == nil || !strings.Contains(err.Error(), "closed Context") {
		t.Errorf("load on a closed context: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// TestContextKeepsTheSessionProtocol: a context cannot change the
// browser's process-wide switches, so NewContext refuses options of
// another protocol; and in a browser started with QUIC forced for the
// origin, a fresh context's loads use h3 for every resource (which is why
// the client agent keeps a Chromium per protocol).
func TestContextKeepsTheSessionProtocol(t *testing.T) {
	requireChromium(t)
	srv := newTestServer(t, serverConfig{objects: testObjects})
	ctx := context.Background()
	h3 := Options{URL: srv.url("/"), Protocol: model.ProtoH3, SPKIHash: srv.spki, ProfileDir: profileParent(t), DisableCache: true}
	s, err := NewSession(ctx, h3)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h2 := h3
	h2.Protocol = model.ProtoH2
	var oe *OptionError
	if _, err := s.NewContext(ctx, h2); !errors.As(err, &oe) || !strings.Contains(err.Error(), "cannot change the browser's switches") {
		t.Errorf("an h2 context in an h3 browser: %v", err)
	}
	k2, _ := h2.LaunchKey()
	k3, _ := h3.LaunchKey()
	h3b := h3
	h3b.Timeout, h3b.URL = 7e9, srv.url("/other")
	k3b, _ := h3b.LaunchKey()
	if k2 == k3 || k3 != k3b {
		t.Error("LaunchKey: h2 and h3 must differ, and the URL's path or the timeout must not count")
	}
	c, err := s.NewContext(ctx, h3)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.tab.want = "h2" // what an h2 sample in this browser would get
	res, err := c.Load(ctx, srv.url("/"))
	var mm *ProtocolMismatchError
	if !errors.As(err, &mm) || len(mm.Mismatches) != testObjects+1 || res == nil || res.Resources[0].Protocol != "h3" {
		t.Errorf("an h2 load in a context of an h3-forced browser: %v (result %+v)", err, res)
	}
}
