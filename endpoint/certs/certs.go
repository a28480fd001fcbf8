// Package certs is quicbench's in-memory certificate authority: one CA per
// testbed (ECDSA P-256) issues the leaf certificate that every server
// protocol presents, so that HTTP/1.1, HTTP/2, HTTP/3 and the raw transports
// run the very same certificate and key exchange.
//
// Nothing touches the disk unless the caller writes the PEM it gets.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Validity of issued certificates. The CA lives for as long as one testbed,
// so short lifetimes are plenty; the leaf stays below the 398 days browsers
// accept.
const (
	caValidity   = 30 * 24 * time.Hour
	leafValidity = 7 * 24 * time.Hour
	backdate     = time.Hour // tolerate small clock differences between namespaces
)

// CA is an in-memory certificate authority.
type CA struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// NewCA creates a fresh certificate authority with an ECDSA P-256 key.
func NewCA() (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certs: generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"quicbench"}, CommonName: "quicbench testbed CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certs: self-signing CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certs: parsing CA: %w", err)
	}
	return &CA{cert: cert, der: der, key: key}, nil
}

// Issue returns a leaf certificate (ECDSA P-256, with the CA certificate in
// its chain) valid for every name given: IP addresses become IP SANs, the
// rest DNS SANs. At least one name is required.
func (ca *CA) Issue(names ...string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: generating leaf key: %w", err)
	}
	return ca.IssueWithKey(key, names...)
}

// IssueWithKey is Issue for a given key pair. Leaves issued with one key
// share their SubjectPublicKeyInfo, and so their SPKIHash: a replay mints
// one leaf per server name (as Web Page Replay does) with the key of the
// server's own leaf, and a client that pins that key (Chromium's
// --ignore-certificate-errors-spki-list) accepts all of them.
func (ca *CA) IssueWithKey(key *ecdsa.PrivateKey, names ...string) (tls.Certificate, error) {
	if key == nil {
		return tls.Certificate{}, errors.New("certs: IssueWithKey needs a key")
	}
	if len(names) == 0 {
		return tls.Certificate{}, errors.New("certs: Issue needs at least one IP address or DNS name")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"quicbench"}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			return tls.Certificate{}, errors.New("certs: empty name")
		}
		if ip := net.ParseIP(strings.Trim(n, "[]")); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			continue
		}
		if strings.ContainsAny(n, " /:@") {
			return tls.Certificate{}, fmt.Errorf("certs: %q is neither an IP address nor a DNS name", n)
		}
		tmpl.DNSNames = append(tmpl.DNSNames, n)
	}
	tmpl.Subject.CommonName = names[0]
	serial, err := randomSerial()
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl.SerialNumber = serial
	now := time.Now()
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(leafValidity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: signing leaf: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certs: parsing leaf: %w", err)
	}
	return tls.Certificate{
		Certificate: [][]byte{der, ca.der},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

// Certificate returns the CA certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate in PEM form, for a client's trust store.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der})
}

// Pool returns a certificate pool trusting only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// SPKIHash returns the base64 (standard encoding) SHA-256 of the
// certificate's DER-encoded SubjectPublicKeyInfo: the form Chromium's
// --ignore-certificate-errors-spki-list expects.
func SPKIHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// LeafSPKIHash returns SPKIHash of the first (leaf) certificate of c.
func LeafSPKIHash(c tls.Certificate) (string, error) {
	leaf := c.Leaf
	if leaf == nil {
		if len(c.Certificate) == 0 {
			return "", errors.New("certs: certificate has no leaf")
		}
		var err error
		leaf, err = x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			return "", fmt.Errorf("certs: parsing leaf: %w", err)
		}
	}
	return SPKIHash(leaf), nil
}

// PoolFromPEM parses one or more PEM certificates into a pool. It fails if
// the input holds no certificate.
func PoolFromPEM(data []byte) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	n := 0
	for rest := bytes.TrimSpace(data); len(rest) > 0; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certs: certificate %d: %w", n+1, err)
		}
		p.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("certs: no PEM CERTIFICATE block found")
	}
	return p, nil
}

func randomSerial() (*big.Int, error) {
	s, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial: %w", err)
	}
	return s.Add(s, big.NewInt(1)), nil
}
