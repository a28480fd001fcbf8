package endpoint

import (
	"errors"
	"fmt"
	"time"

	"github.com/quicbench/quicbench/model"
)

// MismatchError reports that a connection or response did not use what the
// sample asked for: another ALPN or HTTP version, no resumption, or 0-RTT
// not accepted. Such a sample must be stored as invalid, never measured.
type MismatchError struct {
	Proto      string           // protocol asked for (model.Proto*)
	What       string           // what differs: "ALPN", "HTTP version", "resumption", "0-RTT", "transport"
	Want, Got  string           // expected and actual values
	Negotiated model.Negotiated // what the connection negotiated
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("protocol mismatch for %s: %s is %q, want %q", e.Proto, e.What, e.Got, e.Want)
}

// Timeout phases.
const (
	PhaseHandshake = "handshake"  // TCP connect + TLS handshake, or QUIC handshake
	PhaseFirstByte = "first byte" // request fully sent -> first response byte
	PhaseIdle      = "idle"       // no progress while sending a request or receiving a body
	PhaseTotal     = "total"      // the whole Fetch
)

// TimeoutError reports that a phase of a Fetch exceeded its limit.
type TimeoutError struct {
	Phase string        // one of the Phase* constants
	Limit time.Duration // the limit that was exceeded
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timeout: %s took longer than %v", e.Phase, e.Limit)
}

// Timeout reports true, so that TimeoutError satisfies net.Error-style checks.
func (e *TimeoutError) Timeout() bool { return true }

// StatusError reports an HTTP response whose status is not 2xx, or a raw
// response whose status is not OK.
type StatusError struct {
	Path   string
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: unexpected status %d", e.Path, e.Status)
}

// unsupported returns an error wrapping errors.ErrUnsupported with a reason.
func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errors.ErrUnsupported, fmt.Sprintf(format, args...))
}
