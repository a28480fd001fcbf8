package endpoint

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/model"
)

// quicIdle is the QUIC idle timeout: longer than the request watchdog's, so
// that the watchdog, which knows the phase, normally reports a stall.
func quicIdle(idle time.Duration) time.Duration { return max(2*idle, 30*time.Second) }

// quicConn is one client QUIC connection carrying HTTP/3 or raw streams.
type quicConn struct {
	f     *fetcher
	c     *h3.Conn
	raw   bool
	early bool
	hs    atomic.Int64 // handshake completion time (ns), 0 until then

	mu sync.Mutex
	ct ConnTiming
}

func (f *fetcher) dialQUIC(ctx context.Context, early bool) (clientConn, error) {
	qc := &quicConn{f: f, raw: f.spec.Proto == model.ProtoQUIC, early: early}
	alpn := h3.ALPN
	if qc.raw {
		alpn = raw.ALPN
	}
	qc.ct.Start = f.now()
	// HandshakeTimeout keeps quic-go's own handshake timers from ending
	// the handshake before the limit a timeout error reports (ctx, from
	// dial, enforces that limit exactly).
	c, err := h3.Dial(ctx, f.spec.Addr, h3.DialConfig{
		TLS:              f.tlsConf,
		ALPN:             alpn,
		Early:            early,
		IdleTimeout:      quicIdle(f.spec.IdleTimeout),
		HandshakeTimeout: f.spec.HandshakeTimeout,
		QlogDir:          f.spec.QlogDir,
		NoEvents:         f.spec.NoQUICEvents,
	})
	if err != nil {
		return nil, err
	}
	qc.c = c
	qc.ct.Connected = f.now()
	qc.ct.Local = c.LocalAddr().String()
	qc.ct.Remote = f.spec.Addr
	select {
	case <-c.HandshakeComplete():
		qc.hs.Store(qc.ct.Connected)
	default:
		go func() {
			select {
			case <-c.HandshakeComplete():
				qc.hs.Store(f.now())
			case <-c.Done():
			}
		}()
	}
	qc.refresh()
	return qc, nil
}

// refresh updates the negotiated parameters and the handshake time.
func (qc *quicConn) refresh() {
	st := qc.c.State()
	qc.mu.Lock()
	defer qc.mu.Unlock()
	httpVersion := qc.ct.Negotiated.HTTPVersion
	qc.ct.Negotiated = tlsNegotiated(st.TLS)
	qc.ct.Negotiated.HTTPVersion = httpVersion
	qc.ct.Negotiated.QUICVersion = st.Version
	qc.ct.Negotiated.ZeroRTT = st.Used0RTT
	qc.ct.Handshake = qc.hs.Load()
}

// timing returns the connection's record; final after close.
func (qc *quicConn) timing() *ConnTiming { return &qc.ct }

// negotiated is final once the handshake completed: a 0-RTT connection is
// judged after close, by checkNegotiated.
func (qc *quicConn) negotiated() (model.Negotiated, bool) {
	qc.refresh()
	qc.mu.Lock()
	defer qc.mu.Unlock()
	return qc.ct.Negotiated, qc.handshakeDone()
}

func (qc *quicConn) handshakeDone() bool {
	select {
	case <-qc.c.HandshakeComplete():
		return true
	default:
		return false
	}
}

func (qc *quicConn) do(ctx context.Context, rq *request) error {
	rq.t.ZeroRTT = !qc.handshakeDone()
	if qc.raw {
		return qc.doRaw(ctx, rq)
	}
	method := ""
	if qc.f.spec.ZeroRTT && rq.upload == 0 {
		method = h3.MethodGet0RTT
	}
	url := "https://" + qc.f.spec.Addr + rq.t.Path
	err := qc.f.httpExchange(ctx, rq, url, method, func(r *http.Request) (*http.Response, error) {
		return qc.c.RoundTrip(r)
	}, qc.sawVersion)
	return qc.mapErr(err)
}

func (qc *quicConn) mapErr(err error) error {
	if err == nil {
		return nil
	}
	if h3.Is0RTTRejected(err) {
		n, _ := qc.negotiated()
		return &MismatchError{Proto: qc.f.spec.Proto, What: "0-RTT", Want: "accepted", Got: "rejected by the server", Negotiated: n}
	}
	if h3.IsTimeout(err) {
		var te *TimeoutError
		if !errors.As(err, &te) {
			if !qc.handshakeDone() {
				// A 0-RTT connection whose handshake never completed.
				return &TimeoutError{Phase: PhaseHandshake, Limit: qc.f.spec.HandshakeTimeout}
			}
			return &TimeoutError{Phase: PhaseIdle, Limit: quicIdle(qc.f.spec.IdleTimeout)}
		}
	}
	return err
}

func (qc *quicConn) sawVersion(proto string) error {
	return qc.f.recordHTTPVersion(&qc.mu, &qc.ct.Negotiated, proto)
}

func (qc *quicConn) doRaw(ctx context.Context, rq *request) error {
	str, err := qc.c.OpenStream(ctx)
	if err != nil {
		return qc.mapErr(err)
	}
	stop := context.AfterFunc(ctx, str.Abort)
	defer stop()
	err = qc.f.rawExchange(ctx, rq, str, str.CloseWrite)
	if err != nil {
		str.Abort()
	}
	return qc.mapErr(err)
}

func (qc *quicConn) close() {
	st := qc.c.Stats()
	qc.refresh()
	qc.mu.Lock()
	qc.ct.Transport = st
	qc.ct.Closed = qc.f.now()
	qc.mu.Unlock()
	_ = qc.c.Close()
}
