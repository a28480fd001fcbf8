package endpoint

import (
	"crypto/tls"
	"crypto/x509"
	"io"
)

// TLS parameters shared by every protocol, server and client.
//
// TLS 1.3 only. Go's crypto/tls does not let the application choose TLS 1.3
// cipher suites: both ends put TLS_AES_128_GCM_SHA256 first when the CPU has
// AES instructions (and ChaCha20-Poly1305 otherwise), and quic-go uses the
// same crypto/tls code, so every protocol negotiates the same suite on a
// given machine; the negotiated suite is recorded with every connection.
// The key exchange is pinned to X25519 on both ends so that the ClientHello
// is the same size for TCP and QUIC (Go's default would add the large
// post-quantum X25519MLKEM768 share, which makes the QUIC Initial span two
// packets).
var curves = []tls.CurveID{tls.X25519}

func serverTLSConfig(cert tls.Certificate, keyLog io.Writer) *tls.Config {
	return &tls.Config{
		Certificates:     []tls.Certificate{cert},
		MinVersion:       tls.VersionTLS13,
		MaxVersion:       tls.VersionTLS13,
		CurvePreferences: curves,
		KeyLogWriter:     keyLog,
	}
}

func clientTLSConfig(roots *x509.CertPool, serverName string, insecure bool, keyLog io.Writer) *tls.Config {
	return &tls.Config{
		RootCAs:            roots,
		ServerName:         serverName,
		InsecureSkipVerify: insecure, //nolint:gosec // explicit user choice (--insecure), recorded in the result
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		CurvePreferences:   curves,
		KeyLogWriter:       keyLog,
	}
}
