package endpoint

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/internal/sockopt"
	"github.com/quicbench/quicbench/model"
)

// httpClient dials HTTP/1.1 and HTTP/2 connections through net/http's
// Transport.NewClientConn, with dial functions that time the TCP connect
// and the TLS handshake and keep the socket for TCP_INFO.
type httpClient struct {
	f      *fetcher
	tr     *http.Transport
	scheme string
}

type connKey struct{}

func newHTTPClient(f *fetcher) *httpClient {
	h := &httpClient{f: f, scheme: "https"}
	var p http.Protocols
	p.SetHTTP1(true)
	if f.spec.Proto == model.ProtoH2 {
		p.SetHTTP2(true)
	}
	h.tr = &http.Transport{
		Proxy:                  nil,
		DisableCompression:     true,
		ReadBufferSize:         64 << 10,
		WriteBufferSize:        64 << 10,
		MaxResponseHeaderBytes: 1 << 20,
		Protocols:              &p,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:          1000,
			MaxReceiveBufferPerConnection: h3.ConnWindow,
			MaxReceiveBufferPerStream:     h3.StreamWindow,
		},
		DialContext:    h.dialPlain,
		DialTLSContext: h.dialTLS,
	}
	if f.spec.Proto == model.ProtoH1C {
		h.scheme = "http"
	}
	return h
}

// httpConn is one HTTP/1.1 or HTTP/2 client connection.
type httpConn struct {
	f   *fetcher
	ct  ConnTiming
	cc  *http.ClientConn
	tcp *net.TCPConn
	mu  sync.Mutex
}

func (h *httpClient) dial(ctx context.Context) (clientConn, error) {
	hc := &httpConn{f: h.f}
	cc, err := h.tr.NewClientConn(context.WithValue(ctx, connKey{}, hc), h.scheme, h.f.spec.Addr)
	if err != nil {
		if hc.tcp != nil {
			_ = hc.tcp.Close()
		}
		return nil, err
	}
	hc.cc = cc
	return hc, nil
}

func (h *httpClient) connect(ctx context.Context, addr string) (*httpConn, *net.TCPConn, error) {
	hc, _ := ctx.Value(connKey{}).(*httpConn)
	if hc == nil {
		return nil, nil, fmt.Errorf("internal error: dial to %s outside a measured connection", addr)
	}
	hc.ct.Start = h.f.now()
	d := net.Dialer{Control: sockopt.CongestionControl(h.f.spec.CongestionControl)}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	hc.ct.Connected = h.f.now()
	tcp := c.(*net.TCPConn)
	hc.tcp = tcp
	hc.ct.Local, hc.ct.Remote = c.LocalAddr().String(), c.RemoteAddr().String()
	return hc, tcp, nil
}

func (h *httpClient) dialPlain(ctx context.Context, _, addr string) (net.Conn, error) {
	_, tcp, err := h.connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	return tcp, nil
}

func (h *httpClient) dialTLS(ctx context.Context, _, addr string) (net.Conn, error) {
	hc, tcp, err := h.connect(ctx, addr)
	if err != nil {
		return nil, err
	}
	cfg := h.f.tlsConf.Clone()
	cfg.NextProtos = offeredALPN(h.f.spec.Proto)
	tc := tls.Client(tcp, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = tcp.Close()
		hc.tcp = nil
		return nil, err
	}
	hc.ct.Handshake = h.f.now()
	hc.ct.Negotiated = tlsNegotiated(tc.ConnectionState())
	return tc, nil
}

func (hc *httpConn) timing() *ConnTiming { return &hc.ct }

func (hc *httpConn) negotiated() (model.Negotiated, bool) {
	hc.mu.Lock()
	defer hc.mu.Unlock()
	return hc.ct.Negotiated, true
}

func (hc *httpConn) do(ctx context.Context, rq *request) error {
	url := hc.f.http.scheme + "://" + hc.f.spec.Addr + rq.t.Path
	return hc.f.httpExchange(ctx, rq, url, "", hc.cc.RoundTrip, hc.sawVersion)
}

func (hc *httpConn) sawVersion(proto string) error {
	return hc.f.recordHTTPVersion(&hc.mu, &hc.ct.Negotiated, proto)
}

func (hc *httpConn) close() {
	if hc.tcp != nil {
		if st, err := tcpStats(hc.tcp); err == nil {
			hc.ct.Transport = st
		}
	}
	hc.ct.Closed = hc.f.now()
	_ = hc.cc.Close()
}

// httpExchange sends one HTTP request through rt and reads its response,
// recording the request's timeline. method overrides GET (e.g. h3's 0-RTT
// GET); sawVersion checks the response's HTTP version.
func (f *fetcher) httpExchange(ctx context.Context, rq *request, url, method string, rt func(*http.Request) (*http.Response, error), sawVersion func(string) error) error {
	var body io.Reader
	var pr *progressReader
	if method == "" {
		method = http.MethodGet
	}
	if rq.upload > 0 {
		method = http.MethodPost
		pr = &progressReader{r: content.Reader(rq.upload), rq: rq}
		body = pr
	}
	var sent, first atomic.Int64
	trace := &httptrace.ClientTrace{
		WroteRequest: func(wi httptrace.WroteRequestInfo) {
			if wi.Err == nil {
				sent.Store(f.now())
				rq.wd.advance(stageWaiting, PhaseFirstByte, f.spec.FirstByteTimeout)
			}
		},
		GotFirstResponseByte: func() {
			first.Store(f.now())
			rq.wd.advance(stageReceiving, PhaseIdle, f.spec.IdleTimeout)
		},
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, url, body)
	if err != nil {
		return err
	}
	if body != nil {
		req.ContentLength = rq.upload
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	req.Header.Set("User-Agent", "quicbench")
	if sn := f.spec.ServerName; sn != "" && net.ParseIP(sn) == nil {
		// A named server (a replayed origin) is asked for by its name, as
		// a browser does, whatever address it is dialled at.
		req.Host = sn
		if _, port, _ := net.SplitHostPort(f.spec.Addr); port != "" && port != "443" {
			req.Host = net.JoinHostPort(sn, port)
		}
	}
	rq.t.Start = f.now()
	resp, err := rt(req)
	defer func() {
		// The trace's first-byte time (response header) takes precedence
		// over readBody's (first body chunk).
		rq.t.Sent = sent.Load()
		if fb := first.Load(); fb != 0 {
			rq.t.FirstByte = fb
		}
		// net/http's writer goroutine reports "request written" after the
		// write returned; on a fast path the response can be read first.
		// The request was necessarily sent before its answer arrived.
		if rq.t.Sent > rq.t.FirstByte && rq.t.FirstByte != 0 {
			rq.t.Sent = rq.t.FirstByte
		}
		if pr != nil {
			rq.t.UploadBytes = pr.n.Load()
		}
	}()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rq.t.Status = resp.StatusCode
	if err := sawVersion(resp.Proto); err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return &StatusError{Path: rq.t.Path, Status: resp.StatusCode}
	}
	isUpload := rq.upload > 0 && strings.HasPrefix(rq.t.Path, "/upload")
	if isUpload {
		rq.keep = true
	}
	if err := f.readBody(ctx, resp.Body, rq); err != nil {
		return err
	}
	if resp.ContentLength >= 0 && rq.t.Bytes != resp.ContentLength {
		rq.t.End = 0
		return fmt.Errorf("truncated body: %d of %d bytes: %w", rq.t.Bytes, resp.ContentLength, io.ErrUnexpectedEOF)
	}
	if isUpload {
		var rep UploadReport
		if err := json.Unmarshal(rq.body, &rep); err != nil {
			return fmt.Errorf("/upload answered %q: %w", rq.body, err)
		}
		if rep.Bytes != rq.upload {
			return fmt.Errorf("server received %d of %d upload bytes", rep.Bytes, rq.upload)
		}
		rq.t.ServerUploadNanos = rep.Nanos
		rq.body = nil
	}
	return nil
}
