package endpoint

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/internal/sockopt"
	"github.com/quicbench/quicbench/model"
)

// rawEchoSize is the body size of the raw protocol's /echo: the size of
// HTTP's /echo body ("ok\n"), so latency tests move the same payload.
const rawEchoSize = 3

// rawRequestFor maps a path to a raw request.
func rawRequestFor(path string, upload int64) (raw.Request, error) {
	r := raw.Request{Upload: uint64(upload)}
	switch {
	case path == "/echo":
		r.Size = rawEchoSize
	case path == "/upload":
	case strings.HasPrefix(path, "/bytes/"):
		n, err := content.ParseSize(strings.TrimPrefix(path, "/bytes/"))
		if err != nil {
			return raw.Request{}, fmt.Errorf("path %q: %w", path, err)
		}
		r.Size = uint64(n)
	default:
		return raw.Request{}, fmt.Errorf("path %q: the raw protocols (tcp, quic) serve only /bytes/N, /echo and /upload", path)
	}
	return r, nil
}

// rawTCPConn is one raw protocol connection over TLS/TCP.
type rawTCPConn struct {
	f   *fetcher
	ct  ConnTiming
	tcp *net.TCPConn
	tc  *tls.Conn
}

func (f *fetcher) dialRawTCP(ctx context.Context) (clientConn, error) {
	rc := &rawTCPConn{f: f}
	rc.ct.Start = f.now()
	d := net.Dialer{Control: sockopt.CongestionControl(f.spec.CongestionControl)}
	c, err := d.DialContext(ctx, "tcp", f.spec.Addr)
	if err != nil {
		return nil, err
	}
	rc.ct.Connected = f.now()
	rc.tcp = c.(*net.TCPConn)
	rc.ct.Local, rc.ct.Remote = c.LocalAddr().String(), c.RemoteAddr().String()
	cfg := f.tlsConf.Clone()
	cfg.NextProtos = offeredALPN(model.ProtoTCP)
	rc.tc = tls.Client(c, cfg)
	if err := rc.tc.HandshakeContext(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	rc.ct.Handshake = f.now()
	rc.ct.Negotiated = tlsNegotiated(rc.tc.ConnectionState())
	return rc, nil
}

func (rc *rawTCPConn) timing() *ConnTiming { return &rc.ct }

func (rc *rawTCPConn) negotiated() (model.Negotiated, bool) { return rc.ct.Negotiated, true }

func (rc *rawTCPConn) do(ctx context.Context, rq *request) error {
	// A cancelled request (watchdog, total timeout) unblocks reads and
	// writes through the deadline; the connection is unusable afterwards,
	// which ends the sample anyway.
	stop := context.AfterFunc(ctx, func() { _ = rc.tc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return rc.f.rawExchange(ctx, rq, rc.tc, nil)
}

func (rc *rawTCPConn) close() {
	if st, err := tcpStats(rc.tcp); err == nil {
		rc.ct.Transport = st
	}
	rc.ct.Closed = rc.f.now()
	_ = rc.tc.Close()
}

// rawExchange sends one raw request on rw and reads its response.
// closeWrite, when set, ends the send side after the upload (QUIC streams).
func (f *fetcher) rawExchange(ctx context.Context, rq *request, rw io.ReadWriter, closeWrite func() error) error {
	rr, err := rawRequestFor(rq.t.Path, rq.upload)
	if err != nil {
		return err
	}
	rq.t.Start = f.now()
	if _, err := rw.Write(raw.AppendRequest(make([]byte, 0, raw.RequestHeaderSize), rr)); err != nil {
		return err
	}
	if rr.Upload > 0 {
		buf := make([]byte, 64<<10)
		n, err := io.CopyBuffer(onlyWriter{rw}, &progressReader{r: content.Reader(int64(rr.Upload)), rq: rq}, buf)
		rq.t.UploadBytes = n
		if err != nil {
			return err
		}
	}
	if closeWrite != nil {
		if err := closeWrite(); err != nil {
			return err
		}
	}
	rq.t.Sent = f.now()
	rq.wd.advance(stageWaiting, PhaseFirstByte, f.spec.FirstByteTimeout)

	var hdr [raw.ResponseHeaderSize]byte
	n, err := io.ReadAtLeast(rw, hdr[:], 1)
	if n > 0 {
		rq.t.FirstByte = f.now()
		rq.wd.advance(stageReceiving, PhaseIdle, f.spec.IdleTimeout)
	}
	if err == nil {
		_, err = io.ReadFull(rw, hdr[n:])
	}
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return fmt.Errorf("connection ended inside the response header: %w", io.ErrUnexpectedEOF)
		}
		return err
	}
	resp, err := raw.ParseResponse(hdr[:])
	if err != nil {
		return err
	}
	if resp.Status != raw.StatusOK {
		rq.t.Status = 400
		return &StatusError{Path: rq.t.Path, Status: 400}
	}
	rq.t.Status = 200
	if resp.UploadBytes != rr.Upload {
		return fmt.Errorf("server received %d of %d upload bytes", resp.UploadBytes, rr.Upload)
	}
	rq.t.ServerUploadNanos = int64(resp.UploadNanos)
	if resp.Size != rr.Size {
		return fmt.Errorf("server announced a %d-byte body, %d were asked for", resp.Size, rr.Size)
	}
	if err := f.readBody(ctx, io.LimitReader(rw, int64(resp.Size)), rq); err != nil {
		return err
	}
	if uint64(rq.t.Bytes) != resp.Size {
		rq.t.End = 0
		return fmt.Errorf("truncated body: %d of %d bytes: %w", rq.t.Bytes, resp.Size, io.ErrUnexpectedEOF)
	}
	return nil
}

// onlyWriter hides any ReadFrom of the destination, so that io.CopyBuffer
// uses the given buffer and the progress reader sees every read.
type onlyWriter struct{ w io.Writer }

func (o onlyWriter) Write(p []byte) (int, error) { return o.w.Write(p) }
