package endpoint

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go/http3"

	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// requireAioquic returns the aioquic peer's Python, or ends the test.
func requireAioquic(t *testing.T) string {
	t.Helper()
	py, err := peers.FindAioquic()
	if err != nil {
		testsupport.Unavailable(t, "%v", err)
	}
	return py
}

func requireCaddy(t *testing.T) {
	t.Helper()
	if _, _, err := peers.FindCaddy(context.Background()); err != nil {
		testsupport.Unavailable(t, "%v", err)
	}
}

// TestAioquicStatsAccessor runs the aioquic server's self-check, which reads
// a connection's statistics through aioquic's private attributes: a new
// aioquic release that renames them fails here.
func TestAioquicStatsAccessor(t *testing.T) {
	py := requireAioquic(t)
	v, out, err := peers.AioquicCheck(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	if v != peers.AioquicVersion {
		t.Fatalf("the venv holds aioquic %s, want the pinned %s", v, peers.AioquicVersion)
	}
	var got struct {
		Stats aioquicStats `json:"stats"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("self-check output %q: %v", out, err)
	}
	st := got.Stats
	if st.CC != "cubic" || st.Cwnd <= 0 || st.PacketsSent < 1 || st.PTOCount < 1 {
		t.Fatalf("statistics read through the accessors: %+v", st)
	}
}

// loopbackClient fetches from a peer on 127.0.0.1 over h1, h2 or h3.
func loopbackClient(t *testing.T, info ServerInfo, proto string) *http.Client {
	t.Helper()
	pool, err := certs.PoolFromPEM([]byte(info.CAPEM))
	if err != nil {
		t.Fatal(err)
	}
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	switch proto {
	case model.ProtoH3:
		tr := &http3.Transport{TLSClientConfig: tc}
		t.Cleanup(func() { tr.Close() })
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	default:
		tr := &http.Transport{TLSClientConfig: tc}
		var p http.Protocols
		p.SetHTTP1(proto == model.ProtoH1)
		p.SetHTTP2(proto == model.ProtoH2)
		tr.Protocols = &p
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	}
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, b
}

// checkSameContent fetches a page with its objects and a /bytes body from
// a peer and compares them byte for byte with what quicbench's server
// sends (package content).
func checkSameContent(t *testing.T, c *http.Client, base, proto string) {
	t.Helper()
	const pagePath = "/page/4/100-3KB"
	pg, err := content.ParsePage("4", "100-3KB")
	if err != nil {
		t.Fatal(err)
	}
	resp, b := get(t, c, base+pagePath)
	if resp.StatusCode != 200 || !bytes.Equal(b, pg.HTML(pagePath)) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("%s %s: status %d, headers %v, body %q, want %q", proto, pagePath, resp.StatusCode, resp.Header, b, pg.HTML(pagePath))
	}
	if resp.Proto != map[string]string{model.ProtoH1: "HTTP/1.1", model.ProtoH2: "HTTP/2.0", model.ProtoH3: "HTTP/3.0"}[proto] {
		t.Fatalf("%s: response over %s", proto, resp.Proto)
	}
	for i := range pg.Objects {
		var want bytes.Buffer
		if err := content.WriteObject(&want, pg.ObjectSize(i)); err != nil {
			t.Fatal(err)
		}
		p := content.ObjectPath(pagePath, i)
		resp, b := get(t, c, base+p)
		if resp.StatusCode != 200 || !bytes.Equal(b, want.Bytes()) {
			t.Fatalf("%s %s: status %d, %d bytes differing from quicbench's %d", proto, p, resp.StatusCode, len(b), want.Len())
		}
	}
	resp, b = get(t, c, base+"/bytes/300000")
	var v content.Verifier
	if resp.StatusCode != 200 || len(b) != 300000 || v.Check(b) != nil {
		t.Fatalf("%s /bytes/300000: status %d, %d bytes, %v", proto, resp.StatusCode, len(b), v.Check(b))
	}
}

// TestPeersServeQuicbenchContent runs both peers on the loopback interface
// and checks that they send the same page, objects and /bytes bodies as
// quicbench's own server, and what their hello says.
func TestPeersServeQuicbenchContent(t *testing.T) {
	t.Run("aioquic", func(t *testing.T) {
		requireAioquic(t)
		p, err := StartPeer(context.Background(), PeerConfig{Impl: peers.Aioquic, Host: "127.0.0.1", Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		info := p.Info()
		if info.Impl != peers.Aioquic || info.Version != "aioquic "+peers.AioquicVersion || strings.Join(info.Protocols, ",") != "h3" ||
			info.Settings["cc"] != AioquicCC || info.Settings["max_datagram_size"] != strconv.Itoa(AioquicMaxDatagramSize) || info.Port == 0 {
			t.Fatalf("hello %+v", info)
		}
		checkSameContent(t, loopbackClient(t, info, model.ProtoH3), "https://127.0.0.1:"+strconv.Itoa(info.Port), model.ProtoH3)
		if _, err := p.ConnStats(context.Background(), "tcp", "127.0.0.1:1"); err == nil {
			t.Fatal("aioquic gave statistics of a TCP connection")
		}
		cpu, err := p.CPU()
		if err != nil || cpu.User+cpu.Sys <= 0 {
			t.Fatalf("CPU %+v, %v", cpu, err)
		}
		pid := p.cmd.Process.Pid
		p.Close()
		if err := syscallKill0(pid); err == nil {
			t.Fatalf("aioquic process %d still exists after Close", pid)
		}
	})
	t.Run("caddy", func(t *testing.T) {
		requireCaddy(t)
		p, err := StartPeer(context.Background(), PeerConfig{Impl: peers.Caddy, Host: "127.0.0.1", Paths: []string{"/page/4/100-3KB", "/bytes/300000"}, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		info := p.Info()
		if info.Impl != peers.Caddy || !strings.HasPrefix(info.Version, "caddy ") || strings.Join(info.Protocols, ",") != "h1,h2,h3" {
			t.Fatalf("hello %+v", info)
		}
		base := "https://127.0.0.1:" + strconv.Itoa(info.Port)
		for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoH3} {
			checkSameContent(t, loopbackClient(t, info, proto), base, proto)
		}
		if _, err := p.ConnStats(context.Background(), "tcp", "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "caddy") {
			t.Fatalf("caddy statistics: %v", err)
		}
		dir := p.dir
		p.Close()
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("caddy's scratch directory %s remains: %v", dir, err)
		}
	})
}

// TestPeerBadInput checks the errors of bad peer configurations.
func TestPeerBadInput(t *testing.T) {
	for _, c := range []struct {
		cfg  PeerConfig
		want string
	}{
		{PeerConfig{Impl: "nginx"}, "not \"nginx\""},
		{PeerConfig{Impl: peers.Aioquic, Host: "::1"}, "not an IPv4 address"},
		{PeerConfig{Impl: peers.Caddy, QlogDir: t.TempDir()}, "neither qlog"},
	} {
		if _, err := StartPeer(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.cfg, err, c.want)
		}
	}
	for _, path := range []string{"/upload", "/bytes/x", "/page/1", "/bytes/../../etc", "bytes/1"} {
		if err := Materialize(t.TempDir(), []string{path}); err == nil {
			t.Errorf("Materialize(%q) succeeded", path)
		}
	}
}

// TestAioquicAcrossTestbed runs the aioquic peer in a testbed's server
// namespace, as quicbench run does, and quicbench's client in the client
// namespace: a verified 1 MB download with the server's statistics of the
// connection, an upload and a page.
func TestAioquicAcrossTestbed(t *testing.T) {
	requireAioquic(t)
	r := newPeerRig(t, "delay 5ms", &PeerConfig{Impl: peers.Aioquic})
	if r.info.Impl != peers.Aioquic || r.info.Port == 0 {
		t.Fatalf("hello %+v", r.info)
	}
	res := r.fetch(t, FetchSpec{Proto: model.ProtoH3, Paths: []string{"/bytes/1MB"}, Verify: true})
	if res.Negotiated.ALPN != "h3" || res.Bytes != 1_000_000 || res.Requests[0].Status != 200 {
		t.Fatalf("download: negotiated %+v, %d bytes, status %d", res.Negotiated, res.Bytes, res.Requests[0].Status)
	}
	replies, err := r.ctl.ConnStats(5*time.Second, res.ConnRefs()...)
	if err != nil || len(replies) != 1 || replies[0].Stats == nil {
		t.Fatalf("server statistics: %+v, %v", replies, err)
	}
	st := replies[0].Stats
	if st.Side != "server" || st.CongestionAlgo != AioquicCC || st.SmoothedRTTms < 9 || st.MinRTTms < 9 || st.CwndBytes <= 0 ||
		st.PacketsSent < 1_000_000/AioquicMaxDatagramSize || st.CongestionEvents != model.NotMeasured {
		t.Fatalf("server statistics of a 1 MB download over a 10 ms RTT: %+v", st)
	}
	res = r.fetch(t, FetchSpec{Proto: model.ProtoH3, Paths: []string{"/upload"}, Upload: 2_000_000})
	if q := res.Requests[0]; q.Status != 200 || q.UploadBytes != 2_000_000 || q.ServerUploadNanos <= 0 {
		t.Fatalf("upload: %+v", q)
	}
	res = r.fetch(t, FetchSpec{Proto: model.ProtoH3, Paths: []string{"/page/6/2KB-20KB"}, Page: true})
	pg, _ := content.ParsePage("6", "2KB-20KB")
	if len(res.Requests) != 7 || res.Bytes != pg.TotalBytes()+int64(len(pg.HTML("/page/6/2KB-20KB"))) {
		t.Fatalf("page: %d requests, %d bytes", len(res.Requests), res.Bytes)
	}
	for _, q := range res.Requests {
		if q.Status != 200 {
			t.Fatalf("page request %+v", q)
		}
	}
	cpu, err := r.ctl.CPU()
	if err != nil || cpu.User+cpu.Sys <= 0 {
		t.Fatalf("server CPU %+v, %v", cpu, err)
	}
}

// TestCaddySiteAcrossTestbed runs Caddy in a testbed's server namespace and
// loads a site from it over h1, h2 and h3, checking what was negotiated.
func TestCaddySiteAcrossTestbed(t *testing.T) {
	requireCaddy(t)
	site := t.TempDir()
	files := map[string]string{
		"index.html": `<!DOCTYPE html><html><head><link rel="stylesheet" href="style.css"></head><body><img src="img/a.png"></body></html>`,
		"style.css":  "body { color: #333 }\n",
		"img/a.png":  strings.Repeat("x", 20000),
	}
	for name, body := range files {
		p := filepath.Join(site, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := newPeerRig(t, "delay 5ms", &PeerConfig{Impl: peers.Caddy, Sites: map[string]string{"demo": site}, Paths: []string{"/bytes/200000"}})
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoH3} {
		res := r.fetch(t, FetchSpec{Proto: proto, Paths: []string{"/site/demo/"}, Page: true})
		if res.Negotiated.ALPN != expectedALPN[proto] {
			t.Fatalf("%s: negotiated %+v", proto, res.Negotiated)
		}
		want := int64(0)
		for _, b := range files {
			want += int64(len(b))
		}
		if len(res.Requests) != 3 || res.Bytes != want {
			t.Fatalf("%s: site: %d requests (want 3), %d bytes (want %d): %+v", proto, len(res.Requests), res.Bytes, want, res.Requests)
		}
		for _, q := range res.Requests {
			if q.Status != 200 {
				t.Fatalf("%s: %+v", proto, q)
			}
		}
	}
	res := r.fetch(t, FetchSpec{Proto: model.ProtoH3, Paths: []string{"/bytes/200000"}, Verify: true})
	if res.Bytes != 200000 {
		t.Fatalf("download from caddy: %d bytes", res.Bytes)
	}
	replies, err := r.ctl.ConnStats(time.Second, res.ConnRefs()...)
	if err != nil || len(replies) != 1 || replies[0].Error == "" {
		t.Fatalf("caddy statistics: %+v, %v (want a per-connection error)", replies, err)
	}
}

// syscallKill0 reports whether process pid exists (signal 0).
func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }
