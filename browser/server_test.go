package browser

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// testServer serves a page with N images over TLS on TCP (ALPN h2 and
// http/1.1) and over HTTP/3 on the same port number over UDP, on
// 127.0.0.1 only, with a self-signed ECDSA P-256 certificate.
type testServer struct {
	port    int
	plain   int // port of the cleartext HTTP/1.1 server (0 when none)
	spki    string
	objects int

	mu       sync.Mutex
	protos   map[string]int // requests per r.Proto
	tcpConns int            // TCP connections accepted
	quicConn int            // QUIC connections accepted
	remotes  map[string]int // requests per client address (one per connection)

	handler http.Handler

	hanging chan struct{} // receives when a /hang request arrived
	release chan struct{} // closed at cleanup: /hang requests return
}

type serverConfig struct {
	objects int
	altSvc  bool // send Alt-Svc: h3=":port" on every response
}

// newTestServer starts a test server in the current network namespace.
// Besides TLS and QUIC it serves cleartext HTTP/1.1 on another port.
func newTestServer(t testing.TB, cfg serverConfig) *testServer {
	t.Helper()
	tcp, udp := listenPair(t)
	s := serveOn(t, cfg, tcp, udp)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.plain = ln.Addr().(*net.TCPAddr).Port
	hs := &http.Server{Handler: s.handler}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return s
}

// listenPair opens a TCP listener and a UDP socket with the same port
// number on 127.0.0.1.
func listenPair(t testing.TB) (net.Listener, net.PacketConn) {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		udp, err := net.ListenPacket("udp", ln.Addr().String())
		if err == nil {
			return ln, udp
		}
		ln.Close()
	}
	t.Fatal("no port free on both TCP and UDP")
	return nil, nil
}

func serveOn(t testing.TB, cfg serverConfig, tcp net.Listener, udp net.PacketConn) *testServer {
	t.Helper()
	cert, leaf := selfSigned(t)
	s := &testServer{
		port:    tcp.Addr().(*net.TCPAddr).Port,
		spki:    SPKIHash(leaf),
		objects: cfg.objects,
		protos:  map[string]int{},
		remotes: map[string]int{},
		hanging: make(chan struct{}, 16),
		release: make(chan struct{}),
	}
	img := noisePNG(48, 48)
	page := pageHTML(cfg.objects)
	altSvc := fmt.Sprintf(`h3=":%d"; ma=3600`, s.port)

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(page)
	})
	mux.HandleFunc("/obj/{name}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Cache-Control", "max-age=3600")
		w.Write(img)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		s.hanging <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-s.release:
		}
	})
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.protos[r.Proto]++
		s.remotes[r.RemoteAddr]++
		s.mu.Unlock()
		if cfg.altSvc {
			w.Header().Set("Alt-Svc", altSvc)
		}
		mux.ServeHTTP(w, r)
	})

	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	hs := &http.Server{
		Handler:   s.handler,
		TLSConfig: tlsConf.Clone(),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.mu.Lock()
				s.tcpConns++
				s.mu.Unlock()
			}
		},
		// Chromium's unused preconnect sockets end with handshake EOFs.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	hs.Protocols = new(http.Protocols)
	hs.Protocols.SetHTTP1(true)
	hs.Protocols.SetHTTP2(true)
	h3 := &http3.Server{
		Handler:   s.handler,
		TLSConfig: http3.ConfigureTLSConfig(tlsConf.Clone()),
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			s.mu.Lock()
			s.quicConn++
			s.mu.Unlock()
			return ctx
		},
	}
	go hs.ServeTLS(tcp, "", "")
	go h3.Serve(udp)
	t.Cleanup(func() {
		close(s.release)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		hs.Close()
		h3.Close()
		udp.Close()
	})
	return s
}

func (s *testServer) url(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", s.port, path)
}

func (s *testServer) plainURL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", s.plain, path)
}

// requests returns how many requests arrived with the given r.Proto.
func (s *testServer) requests(proto string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.protos[proto]
}

// conns returns the TCP and QUIC connections accepted, and how many
// connections carried requests.
func (s *testServer) conns() (tcp, quic, used int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tcpConns, s.quicConn, len(s.remotes)
}

// pageHTML is a page with a heading, a paragraph and n images.
func pageHTML(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>qb</title></head><body>`)
	b.WriteString(`<h1>quicbench page</h1><p>` + strings.Repeat("Some text to paint. ", 20) + `</p>`)
	for i := range n {
		fmt.Fprintf(&b, `<img src="/obj/%d.png" width="96" height="96" alt="">`, i)
	}
	b.WriteString(`</body></html>`)
	return b.Bytes()
}

// noisePNG is a w x h PNG of seeded noise (incompressible: about 4*w*h bytes).
func noisePNG(w, h int) []byte {
	rng := mrand.New(mrand.NewPCG(1, 2))
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(rng.Uint32()), uint8(rng.Uint32()), uint8(rng.Uint32()), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// selfSigned makes an ECDSA P-256 certificate for IP 127.0.0.1.
func selfSigned(t testing.TB) (tls.Certificate, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "quicbench test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf
}
