package endpoint

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quicbench/quicbench/endpoint/certs"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/model"
)

func TestServerGoneMidTransfer(t *testing.T) {
	for _, proto := range model.Protocols {
		t.Run(proto, func(t *testing.T) {
			srv, pool := testServer(t, ServerConfig{})
			spec := specFor(srv, pool, proto, "/bytes/1GiB")
			spec.Verify = false
			var once sync.Once
			ctx := context.WithValue(context.Background(), chunkHookKey{}, func() {
				once.Do(func() { go srv.Close() })
			})
			res, err := Fetch(ctx, spec)
			if err == nil {
				t.Fatal("transfer from a server that went away succeeded")
			}
			if len(res.Requests) != 1 || res.Requests[0].Bytes == 0 || res.Requests[0].Bytes >= 1<<30 || res.Requests[0].Error == "" {
				t.Fatalf("partial result %+v", res.Requests)
			}
			if res.Requests[0].End != 0 {
				t.Errorf("failed request has an end time %d", res.Requests[0].End)
			}
			t.Logf("%s: %v after %d bytes", proto, err, res.Requests[0].Bytes)
		})
	}
}

func TestWrongALPNIsMismatch(t *testing.T) {
	// A server without HTTP/2, HTTP/3 and raw TCP.
	srv, pool := testServer(t, ServerConfig{Protocols: []string{model.ProtoH1, model.ProtoQUIC}})
	cases := map[string]string{
		model.ProtoH2:  "http/1.1", // the client offers h2 and http/1.1, like browsers
		model.ProtoH3:  "refused",  // QUIC: no common ALPN fails the handshake
		model.ProtoTCP: "refused",
	}
	for proto, got := range cases {
		_, err := Fetch(context.Background(), specFor(srv, pool, proto, "/echo"))
		var me *MismatchError
		if !errors.As(err, &me) || me.What != "ALPN" || !strings.Contains(me.Got, got) {
			t.Errorf("%s: err = %v, want an ALPN mismatch with %q", proto, err, got)
		}
	}
	// The same server over the right protocols works.
	for _, proto := range []string{model.ProtoH1, model.ProtoQUIC} {
		if _, err := Fetch(context.Background(), specFor(srv, pool, proto, "/echo")); err != nil {
			t.Errorf("%s: %v", proto, err)
		}
	}
}

func TestHTTPVersionMismatch(t *testing.T) {
	f := &fetcher{spec: FetchSpec{Proto: model.ProtoH2}}
	err := f.checkHTTPVersion(model.Negotiated{ALPN: "h2"}, "HTTP/1.1")
	var me *MismatchError
	if !errors.As(err, &me) || me.What != "HTTP version" || me.Want != "HTTP/2.0" {
		t.Fatalf("err = %v", err)
	}
	res := &FetchResult{Conns: []ConnTiming{{Negotiated: model.Negotiated{ALPN: "h3", TLSVersion: "TLS 1.3", Resumed: true}}}}
	f = &fetcher{spec: FetchSpec{Proto: model.ProtoH3, Resume: true, ZeroRTT: true}}
	if err := f.checkNegotiated(res); !errors.As(err, &me) || me.What != "0-RTT" {
		t.Fatalf("0-RTT not accepted: err = %v", err)
	}
	res.Conns[0].Negotiated.Resumed = false
	if err := f.checkNegotiated(res); !errors.As(err, &me) || me.What != "resumption" {
		t.Fatalf("not resumed: err = %v", err)
	}
}

// fakeServer accepts connections on a loopback listener and runs serve on
// each.
func fakeServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); serve(c) })
		}
	})
	return ln.Addr().String()
}

// truncatedHTTP1 reads an HTTP/1.1 request's header from c and answers
// with a Content-Length of 1000 but only 10 bytes of body.
func truncatedHTTP1(c io.ReadWriter) {
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			break
		}
	}
	io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")
}

func TestTruncatedBody(t *testing.T) {
	addr := fakeServer(t, func(c net.Conn) { truncatedHTTP1(c) })
	res, err := Fetch(context.Background(), FetchSpec{Proto: model.ProtoH1C, Addr: addr, Paths: []string{"/bytes/1000"}})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("h1c truncated body: err = %v", err)
	}
	if res.Requests[0].Bytes != 10 {
		t.Fatalf("received %d bytes", res.Requests[0].Bytes)
	}

	ca, _ := certs.NewCA()
	cert, _ := ca.Issue("127.0.0.1")
	conf := serverTLSConfig(cert, nil)
	conf.NextProtos = []string{raw.ALPN}
	addr = fakeServer(t, func(c net.Conn) {
		tc := tls.Server(c, conf)
		req, err := raw.ReadRequest(tc)
		if err != nil {
			return
		}
		tc.Write(raw.AppendResponse(nil, raw.Response{Size: req.Size}))
		tc.Write(make([]byte, req.Size/2))
	})
	res, err = Fetch(context.Background(), FetchSpec{Proto: model.ProtoTCP, Addr: addr, Paths: []string{"/bytes/1000"}, RootCAs: ca.Pool()})
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "500 of 1000") {
		t.Fatalf("raw truncated body: err = %v", err)
	}
	if res.Requests[0].End != 0 {
		t.Fatal("truncated request has an end time")
	}

	// HTTP/1.1 over TLS: Content-Length 1000, 10 bytes, close_notify.
	h1 := serverTLSConfig(cert, nil)
	h1.NextProtos = []string{"http/1.1"}
	addr = fakeServer(t, func(c net.Conn) {
		tc := tls.Server(c, h1)
		truncatedHTTP1(tc)
		tc.Close()
	})
	checkTruncated(t, model.ProtoH1, addr, ca.Pool(), 10)

	// HTTP/2: HEADERS with content-length 1000, one DATA frame of 10 bytes
	// without END_STREAM, then the connection ends (close_notify, FIN).
	h2 := serverTLSConfig(cert, nil)
	h2.NextProtos = []string{"h2"}
	addr = fakeServer(t, func(c net.Conn) {
		tc := tls.Server(c, h2)
		if err := tc.Handshake(); err != nil {
			return
		}
		tc.Write(h2Frame(0x4, 0, 0, nil)) // server preface: empty SETTINGS
		preface := make([]byte, 24)
		if _, err := io.ReadFull(tc, preface); err != nil {
			return
		}
		for { // up to the request's HEADERS on stream 1
			var fh [9]byte
			if _, err := io.ReadFull(tc, fh[:]); err != nil {
				return
			}
			n := int(fh[0])<<16 | int(fh[1])<<8 | int(fh[2])
			if _, err := io.CopyN(io.Discard, tc, int64(n)); err != nil {
				return
			}
			if fh[3] == 0x1 {
				break
			}
		}
		// HPACK: :status 200 (static index 8); content-length (static
		// name index 28, literal with incremental indexing) "1000".
		hdr := []byte{0x88, 0x40 | 28, 4, '1', '0', '0', '0'}
		tc.Write(h2Frame(0x1, 0x4, 1, hdr)) // HEADERS, END_HEADERS
		tc.Write(h2Frame(0x0, 0, 1, []byte("0123456789")))
		tc.CloseWrite()
		io.Copy(io.Discard, tc) // until the client closes
	})
	checkTruncated(t, model.ProtoH2, addr, ca.Pool(), 10)
}

// h2Frame encodes an HTTP/2 frame.
func h2Frame(typ, flags byte, stream uint32, payload []byte) []byte {
	n := len(payload)
	b := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, byte(stream >> 24), byte(stream >> 16), byte(stream >> 8), byte(stream)}
	return append(b, payload...)
}

// checkTruncated fetches /bytes/1000 from a server that sends only got
// bytes of it and checks that the fetch fails as truncated.
func checkTruncated(t *testing.T, proto, addr string, roots *x509.CertPool, got int64) {
	t.Helper()
	res, err := Fetch(context.Background(), FetchSpec{Proto: proto, Addr: addr, Paths: []string{"/bytes/1000"}, RootCAs: roots})
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%s truncated body: err = %v, want io.ErrUnexpectedEOF", proto, err)
	}
	if len(res.Requests) != 1 || res.Requests[0].Bytes != got || res.Requests[0].End != 0 || res.Requests[0].Error == "" {
		t.Fatalf("%s truncated body: request %+v", proto, res.Requests)
	}
}

func TestBlackHoleTimesOut(t *testing.T) {
	// A TCP listener that never accepts: the kernel completes the TCP
	// handshake, nobody answers the ClientHello.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A UDP socket that never reads: QUIC Initials go unanswered.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoTCP, model.ProtoH3, model.ProtoQUIC} {
		addr := ln.Addr().String()
		if model.IsQUIC(proto) {
			addr = pc.LocalAddr().String()
		}
		res, err := Fetch(context.Background(), FetchSpec{
			Proto: proto, Addr: addr, Paths: []string{"/echo"}, Insecure: true,
			HandshakeTimeout: 150 * time.Millisecond,
		})
		var te *TimeoutError
		if !errors.As(err, &te) || te.Phase != PhaseHandshake {
			t.Errorf("%s: err = %v, want a handshake timeout", proto, err)
		}
		if res != nil && len(res.Conns) != 0 {
			t.Errorf("%s: a connection was recorded", proto)
		}
	}

	// QUIC: the configured limit, not quic-go's 5 s default, ends the
	// handshake, and the error reports it.
	for _, proto := range []string{model.ProtoH3, model.ProtoQUIC} {
		const limit = 300 * time.Millisecond
		start := time.Now()
		_, err := Fetch(context.Background(), FetchSpec{
			Proto: proto, Addr: pc.LocalAddr().String(), Paths: []string{"/echo"}, Insecure: true,
			HandshakeTimeout: limit,
		})
		elapsed := time.Since(start)
		var te *TimeoutError
		if !errors.As(err, &te) || te.Phase != PhaseHandshake || te.Limit != limit {
			t.Errorf("%s: err = %v, want a handshake timeout with limit %v", proto, err, limit)
		}
		if elapsed > 3*time.Second {
			t.Errorf("%s: gave up after %v with a %v limit", proto, elapsed, limit)
		}
	}

	// A server that accepts and reads but never answers.
	addr := fakeServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	_, err = Fetch(context.Background(), FetchSpec{Proto: model.ProtoH1C, Addr: addr, Paths: []string{"/echo"}, FirstByteTimeout: 150 * time.Millisecond})
	var te *TimeoutError
	if !errors.As(err, &te) || te.Phase != PhaseFirstByte {
		t.Errorf("silent server: err = %v, want a first-byte timeout", err)
	}
}

func TestStalledStreamTimesOut(t *testing.T) {
	srv, pool := testServer(t, ServerConfig{})
	for _, proto := range []string{model.ProtoH1, model.ProtoH2, model.ProtoH3} {
		// Segments 10 s apart: the idle limit ends it after the first.
		spec := specFor(srv, pool, proto, "/stream?segments=3&interval=10s&size=10")
		spec.IdleTimeout = 150 * time.Millisecond
		res, err := Fetch(context.Background(), spec)
		var te *TimeoutError
		if !errors.As(err, &te) || te.Phase != PhaseIdle {
			t.Errorf("%s: err = %v, want an idle timeout; %+v", proto, err, res.Requests)
			continue
		}
		if res.Requests[0].Bytes != 10 {
			t.Errorf("%s: %d bytes before the stall, want 10", proto, res.Requests[0].Bytes)
		}
		// The total limit applies as well.
		spec.IdleTimeout = time.Minute
		spec.Timeout = 200 * time.Millisecond
		_, err = Fetch(context.Background(), spec)
		if !errors.As(err, &te) || te.Phase != PhaseTotal {
			t.Errorf("%s: err = %v, want a total timeout", proto, err)
		}
	}
}

func TestWatchdogPhases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, wd := newWatchdog(context.Background(), PhaseFirstByte, time.Second)
		wd.advance(stageWaiting, PhaseFirstByte, time.Second)
		time.Sleep(900 * time.Millisecond)
		wd.advance(stageReceiving, PhaseIdle, 500*time.Millisecond) // re-armed: 1 s no longer applies
		time.Sleep(400 * time.Millisecond)
		wd.progress()
		// A late report of an earlier stage must not re-arm its limit.
		wd.advance(stageWaiting, PhaseFirstByte, time.Hour)
		time.Sleep(400 * time.Millisecond)
		if ctx.Err() != nil {
			t.Fatal("fired although progress was made within the limit")
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		var te *TimeoutError
		if !errors.As(context.Cause(ctx), &te) || te.Phase != PhaseIdle || te.Limit != 500*time.Millisecond {
			t.Fatalf("cause %v", context.Cause(ctx))
		}
		wd.stop()
		if !errors.As(context.Cause(ctx), &te) {
			t.Fatal("stop after firing replaced the cause")
		}

		ctx, wd = newWatchdog(context.Background(), PhaseFirstByte, time.Second)
		wd.stop()
		time.Sleep(2 * time.Second)
		if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
			t.Fatalf("stopped watchdog: cause %v", cause)
		}
	})
}

// TestConnectionProgress: on a multiplexed connection, bytes of any of its
// requests keep every request in flight on it alive; a request of another
// connection is not, and once the connection stops moving data its
// requests time out.
func TestConnectionProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var conn, other connProgress
		a, wa := newWatchdog(context.Background(), PhaseIdle, 10*time.Second)
		b, wb := newWatchdog(context.Background(), PhaseIdle, 10*time.Second)
		c, wc := newWatchdog(context.Background(), PhaseIdle, 10*time.Second)
		conn.add(wa)
		conn.add(wb)
		other.add(wc)
		ra := &request{wd: wa, conn: &conn}
		for range 5 { // 30 s in which only a's stream gets its turns
			time.Sleep(6 * time.Second)
			ra.progress()
		}
		synctest.Wait()
		if a.Err() != nil || b.Err() != nil {
			t.Fatalf("a request of a connection that moved data every 6 s timed out: a %v, b %v", context.Cause(a), context.Cause(b))
		}
		if c.Err() == nil {
			t.Fatal("a request of another connection was kept alive")
		}
		conn.remove(wa)
		wa.stop()
		time.Sleep(11 * time.Second) // the connection is silent
		synctest.Wait()
		var te *TimeoutError
		if !errors.As(context.Cause(b), &te) || te.Phase != PhaseIdle {
			t.Fatalf("b after 11 s of silence: %v, want an idle timeout", context.Cause(b))
		}
		wb.stop()
		wc.stop()
		// Without a connection, a request's progress is its own.
		d, wd := newWatchdog(context.Background(), PhaseIdle, time.Second)
		rd := &request{wd: wd}
		time.Sleep(900 * time.Millisecond)
		rd.progress()
		time.Sleep(900 * time.Millisecond)
		synctest.Wait()
		if d.Err() != nil {
			t.Fatal("a request's own progress did not re-arm its watchdog")
		}
		wd.stop()
	})
}
