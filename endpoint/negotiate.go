package endpoint

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/quicbench/quicbench/endpoint/h3"
	"github.com/quicbench/quicbench/endpoint/raw"
	"github.com/quicbench/quicbench/model"
)

// expectedALPN is the application protocol each protocol must negotiate.
var expectedALPN = map[string]string{
	model.ProtoH1:   "http/1.1",
	model.ProtoH1C:  "",
	model.ProtoH2:   "h2",
	model.ProtoH3:   h3.ALPN,
	model.ProtoTCP:  raw.ALPN,
	model.ProtoQUIC: raw.ALPN,
}

// expectedHTTP is the HTTP version of each HTTP protocol's responses.
var expectedHTTP = map[string]string{
	model.ProtoH1:  "HTTP/1.1",
	model.ProtoH1C: "HTTP/1.1",
	model.ProtoH2:  "HTTP/2.0",
	model.ProtoH3:  "HTTP/3.0",
}

// offeredALPN is what the client offers: browsers offer h2 with an
// HTTP/1.1 fallback, so that a server without HTTP/2 shows up as a
// mismatch rather than a failed handshake.
func offeredALPN(proto string) []string {
	switch proto {
	case model.ProtoH2:
		return []string{"h2", "http/1.1"}
	case model.ProtoH1:
		return []string{"http/1.1"}
	case model.ProtoTCP:
		return []string{raw.ALPN}
	}
	return nil
}

func tlsNegotiated(st tls.ConnectionState) model.Negotiated {
	return model.Negotiated{
		ALPN:       st.NegotiatedProtocol,
		TLSVersion: tls.VersionName(st.Version),
		Cipher:     tls.CipherSuiteName(st.CipherSuite),
		Resumed:    st.DidResume,
	}
}

func (f *fetcher) checkALPN(n model.Negotiated) error {
	want := expectedALPN[f.spec.Proto]
	if n.ALPN != want {
		return &MismatchError{Proto: f.spec.Proto, What: "ALPN", Want: want, Got: n.ALPN, Negotiated: n}
	}
	if f.spec.Proto != model.ProtoH1C && n.TLSVersion != "TLS 1.3" {
		return &MismatchError{Proto: f.spec.Proto, What: "TLS version", Want: "TLS 1.3", Got: n.TLSVersion, Negotiated: n}
	}
	return nil
}

func (f *fetcher) checkHTTPVersion(n model.Negotiated, got string) error {
	if want := expectedHTTP[f.spec.Proto]; got != want {
		n.HTTPVersion = got
		return &MismatchError{Proto: f.spec.Proto, What: "HTTP version", Want: want, Got: got, Negotiated: n}
	}
	return nil
}

// recordHTTPVersion checks the HTTP version of a connection's response
// (checkHTTPVersion) and records it in n, which mu guards.
func (f *fetcher) recordHTTPVersion(mu *sync.Mutex, n *model.Negotiated, proto string) error {
	mu.Lock()
	defer mu.Unlock()
	if err := f.checkHTTPVersion(*n, proto); err != nil {
		return err
	}
	n.HTTPVersion = proto
	return nil
}

// checkNegotiated verifies, once every connection is closed (QUIC
// handshakes complete, 0-RTT decided), that each measured connection
// negotiated what the spec asked for.
func (f *fetcher) checkNegotiated(res *FetchResult) error {
	for _, c := range res.Conns {
		n := c.Negotiated
		if err := f.checkALPN(n); err != nil {
			return err
		}
		if f.spec.Resume && !n.Resumed {
			return &MismatchError{Proto: f.spec.Proto, What: "resumption", Want: "resumed session", Got: "full handshake", Negotiated: n}
		}
		if f.spec.ZeroRTT && !n.ZeroRTT {
			return &MismatchError{Proto: f.spec.Proto, What: "0-RTT", Want: "accepted", Got: "not accepted", Negotiated: n}
		}
	}
	if f.spec.Resume && res.Primer != nil && res.Primer.Negotiated.Resumed {
		return &MismatchError{Proto: f.spec.Proto, What: "resumption", Want: "full handshake on the priming connection", Got: "resumed", Negotiated: res.Primer.Negotiated}
	}
	return nil
}

// dialError maps handshake failures that mean "the server does not speak
// this protocol" to a *MismatchError.
func (f *fetcher) dialError(err error) error {
	want := expectedALPN[f.spec.Proto]
	if h3.IsNoALPN(err) || strings.Contains(err.Error(), "tls: no application protocol") {
		return &MismatchError{Proto: f.spec.Proto, What: "ALPN", Want: want, Got: "refused by the server (no_application_protocol)"}
	}
	if h3.IsTimeout(err) {
		return &TimeoutError{Phase: PhaseHandshake, Limit: f.spec.HandshakeTimeout}
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		return err
	}
	return fmt.Errorf("connecting to %s: %w", f.spec.Addr, err)
}
