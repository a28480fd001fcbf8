package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"net"
	"strings"
	"testing"
)

func TestIssueVerifiesForIPsAndNames(t *testing.T) {
	ca, err := NewCA()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.Issue("10.99.0.2", "::1", "server.test")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Certificate) != 2 {
		t.Fatalf("chain has %d certificates, want leaf + CA", len(c.Certificate))
	}
	leaf := c.Leaf
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("leaf key is %T, want ECDSA P-256", leaf.PublicKey)
	}
	for _, name := range []string{"10.99.0.2", "::1", "server.test"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "10.99.0.3"}); err == nil {
		t.Error("leaf verified for an IP it was not issued for")
	}
	other, _ := NewCA()
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "server.test"}); err == nil {
		t.Error("leaf verified against a foreign CA")
	}
	if !leaf.IPAddresses[0].Equal(net.ParseIP("10.99.0.2")) {
		t.Errorf("first IP SAN %v", leaf.IPAddresses[0])
	}
}

func TestSPKIHashIsSHA256OfPublicKeyInfo(t *testing.T) {
	ca, _ := NewCA()
	c, err := ca.Issue("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(c.Leaf.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(der)
	want := base64.StdEncoding.EncodeToString(sum[:])
	got, err := LeafSPKIHash(c)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("SPKI hash %s, want %s", got, want)
	}
	c.Leaf = nil // must parse the DER itself
	if got2, _ := LeafSPKIHash(c); got2 != want {
		t.Fatalf("SPKI hash from DER %s, want %s", got2, want)
	}
}

func TestIssueRejectsBadNames(t *testing.T) {
	ca, _ := NewCA()
	for _, names := range [][]string{nil, {""}, {"a b"}, {"http://x"}} {
		if _, err := ca.Issue(names...); err == nil {
			t.Errorf("Issue(%q) succeeded", names)
		}
	}
}

func TestPoolFromPEM(t *testing.T) {
	ca, _ := NewCA()
	c, _ := ca.Issue("localhost")
	p, err := PoolFromPEM(ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: p, DNSName: "localhost"}); err != nil {
		t.Fatal(err)
	}
	if _, err := PoolFromPEM([]byte("not a certificate")); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Fatalf("junk input: err = %v", err)
	}
	bad := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	if _, err := PoolFromPEM(bad); err == nil {
		t.Fatal("corrupt certificate accepted")
	}
}
