package h3

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

func TestQUICConfigHandshakeTimeout(t *testing.T) {
	// quic-go gives up on a handshake after HandshakeIdleTimeout without a
	// packet from the peer: never before the configured limit.
	for _, limit := range []time.Duration{300 * time.Millisecond, 10 * time.Second, 20 * time.Second} {
		if got := quicConfig(limit, 0).HandshakeIdleTimeout; got != limit {
			t.Errorf("handshake limit %v: HandshakeIdleTimeout %v", limit, got)
		}
	}
	if got := quicConfig(0, 0).HandshakeIdleTimeout; got != 0 {
		t.Errorf("no limit: HandshakeIdleTimeout %v, want quic-go's default (0)", got)
	}
}

func TestDialHandshakeTimeout(t *testing.T) {
	// A UDP socket that never answers: the client's Initials go unanswered.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	const limit = 300 * time.Millisecond
	start := time.Now()
	// No deadline on ctx: only the configured limit ends the handshake.
	c, err := Dial(context.Background(), pc.LocalAddr().String(), DialConfig{
		TLS:              &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13},
		ALPN:             ALPN,
		HandshakeTimeout: limit,
		NoEvents:         true,
	})
	elapsed := time.Since(start)
	if err == nil {
		c.Close()
		t.Fatal("handshake with a black hole succeeded")
	}
	if !IsTimeout(err) {
		t.Fatalf("err = %v, want a QUIC timeout", err)
	}
	// quic-go's default would take 5 s; the bound is generous on purpose.
	if elapsed < limit-50*time.Millisecond || elapsed > 3*time.Second {
		t.Fatalf("gave up after %v, want about %v", elapsed, limit)
	}
	t.Logf("gave up after %v: %v", elapsed, err)
}
