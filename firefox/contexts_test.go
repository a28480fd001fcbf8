package firefox

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/model"
)

// cacheServer serves, on 127.0.0.1, over TLS on TCP (h2, http/1.1) and
// HTTP/3 on the same port number, a page of n images that may be cached
// for an hour, every response announcing h3 with Alt-Svc. It counts TCP
// connections and requests.
type cacheServer struct {
	base string
	ca   []byte
	mu   sync.Mutex
	tcp  int
	reqs int
}

func newCacheServer(t *testing.T, n int) *cacheServer {
	t.Helper()
	ca, err := certs.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	var udp net.PacketConn
	for range 20 {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if udp, err = net.ListenPacket("udp", ln.Addr().String()); err == nil {
			break
		}
		ln.Close()
	}
	if udp == nil {
		t.Fatal("no port free on both TCP and UDP")
	}
	port := ln.Addr().(*net.TCPAddr).Port
	s := &cacheServer{base: fmt.Sprintf("https://127.0.0.1:%d", port), ca: ca.CertPEM()}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprint(w, `<!doctype html><html><head><link rel="icon" href="data:,"></head><body><p>page</p>`)
		for i := range n {
			fmt.Fprintf(w, `<img src="/obj/%d" width="20" height="20">`, i)
		}
		fmt.Fprint(w, `</body></html>`)
	})
	mux.HandleFunc("/obj/{i}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(make([]byte, 4000))
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs++
		s.mu.Unlock()
		w.Header().Set("Alt-Svc", fmt.Sprintf(`h3=":%d"; ma=3600`, port))
		mux.ServeHTTP(w, r)
	})
	conf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	hs := &http.Server{Handler: handler, TLSConfig: conf.Clone(), ErrorLog: log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.mu.Lock()
				s.tcp++
				s.mu.Unlock()
			}
		}}
	h3 := &http3.Server{Handler: handler, TLSConfig: http3.ConfigureTLSConfig(conf.Clone())}
	go hs.ServeTLS(ln, "", "")
	go h3.Serve(udp)
	t.Cleanup(func() { hs.Close(); h3.Close(); udp.Close() })
	return s
}

func (s *cacheServer) counts() (tcp, reqs int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tcp, s.reqs
}

// TestUserContextIsolation: what one user context learns stays in it. In
// a user context of a Firefox that discovers HTTP/3 through Alt-Svc (no
// mapping preference), with the HTTP cache on, a second load uses h3 for
// the document and takes the cacheable images from the cache: the
// controls. A second user context starts from nothing: its first load
// fetches the document over TCP again (no Alt-Svc entry) on a new
// connection, and every image from the server (no cache entry).
func TestUserContextIsolation(t *testing.T) {
	requireFirefox(t)
	const objects = 4
	srv := newCacheServer(t, objects)
	ctx := context.Background()
	opts := Options{URL: srv.base + "/", Protocol: model.ProtoH3, CAPEM: srv.ca, ProfileDir: t.TempDir(), StartTimeout: time.Minute,
		Prefs: map[string]any{"network.http.http3.alt-svc-mapping-for-testing": ""}}
	s, err := NewSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	first := func(u *UserContext, name string) {
		t.Helper()
		res, err := u.Load(ctx, srv.base+"/")
		var mm *browser.ProtocolMismatchError
		if !errors.As(err, &mm) || res == nil {
			t.Fatalf("%s: first load: %v, want the document over TCP (*ProtocolMismatchError)", name, err)
		}
		if res.Resources[0].Protocol == "h3" || res.CachedResources != 0 {
			t.Errorf("%s: first load: document over %q, %d resources cached; want TCP and none: state of an earlier context was known", name, res.Resources[0].Protocol, res.CachedResources)
		}
	}
	a, err := s.NewContext(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	first(a, "user context A")
	res, err := a.Load(ctx, srv.base+"/")
	if res == nil {
		t.Fatalf("user context A: second load: %v", err)
	}
	if res.Resources[0].Protocol != "h3" || res.CachedResources == 0 {
		t.Fatalf("user context A: second load: document over %q, %d resources cached; want h3 and the images from the cache (the controls)", res.Resources[0].Protocol, res.CachedResources)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	tcp0, reqs0 := srv.counts()
	b, err := s.NewContext(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	first(b, "user context B")
	tcp1, reqs1 := srv.counts()
	if tcp1 <= tcp0 || reqs1-reqs0 != objects+1 {
		t.Errorf("user context B: %d new TCP connections, %d requests; want at least 1 and %d (the document and every image)", tcp1-tcp0, reqs1-reqs0, objects+1)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Load(ctx, srv.base+"/"); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("load in a closed user context: %v", err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
}

// TestUserContextProtocols: one Firefox serves every protocol: a user
// context sets the sample's protocol preferences in the running browser,
// and each load uses the protocol asked for (h3, h2, h1, h3). Options that
// differ only by protocol launch the same browser (LaunchKey); other
// preferences do not.
func TestUserContextProtocols(t *testing.T) {
	requireFirefox(t)
	base, ca := loopServer(t)
	page := base + "/page/3/2KB"
	opts := Options{URL: page, Protocol: model.ProtoH3, CAPEM: ca, ProfileDir: t.TempDir(), DisableCache: true, StartTimeout: time.Minute}
	ctx := context.Background()
	s, err := NewSession(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key, _ := opts.LaunchKey()
	for _, proto := range []string{model.ProtoH3, model.ProtoH2, model.ProtoH1, model.ProtoH3} {
		o := opts
		o.Protocol = proto
		if k, _ := o.LaunchKey(); k != key {
			t.Errorf("%s: LaunchKey differs from h3's", proto)
		}
		u, err := s.NewContext(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		res, err := u.Load(ctx, page)
		if err != nil {
			t.Errorf("%s: %v", proto, err)
		} else if want, _ := browser.NextHopProtocol(proto); res.Resources[0].Protocol != want {
			t.Errorf("%s: document over %q", proto, res.Resources[0].Protocol)
		}
		if err := u.Close(); err != nil {
			t.Errorf("%s: close: %v", proto, err)
		}
	}
	other := opts
	other.Prefs = map[string]any{"network.http.speculative-parallel-limit": 6}
	if k, _ := other.LaunchKey(); k == key {
		t.Error("LaunchKey ignores a preference that is not the protocol's")
	}
}
