// Package raw is quicbench's request/response protocol without HTTP, run over
// TLS 1.3 on TCP and over QUIC streams, in the spirit of the QUIC performance
// draft (draft-banks-quic-performance): the client says how many bytes it
// wants and sends any upload bytes; the server drains the upload and answers
// with that many bytes. It measures the transport, not an HTTP stack.
//
// Wire format (all integers big-endian):
//
//	request  (20 bytes): 'Q' 'B' version(1) flags(0) | response size u64 | upload size u64
//	                     followed by exactly "upload size" bytes
//	response (28 bytes): 'q' 'b' version(1) status   | upload bytes received u64 |
//	                     upload duration ns u64 | body size u64
//	                     followed by exactly "body size" bytes
//
// The server writes the response header only after the whole upload was
// received, so the client sees the end of its upload as the response's first
// byte. Over TCP a connection carries any number of requests in sequence;
// over QUIC each request uses its own bidirectional stream (the client closes
// its send side after the upload, the server its side after the body).
// Status 0 is success; any other status ends the exchange and the
// connection or stream with an empty body.
package raw

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ALPN is the TLS application protocol of the raw protocol, on TCP and QUIC.
const ALPN = "qb-raw"

// Version is the protocol version this package speaks.
const Version = 1

// Header sizes.
const (
	RequestHeaderSize  = 20
	ResponseHeaderSize = 28
)

// MaxSize bounds the response and upload sizes of one request (1 TiB).
const MaxSize = uint64(1) << 40

// Response status codes.
const (
	StatusOK         = 0 // body follows
	StatusBadRequest = 1 // the request header was malformed or out of bounds
)

// Request is one raw request.
type Request struct {
	Size   uint64 // response body bytes wanted
	Upload uint64 // upload bytes following the header
}

// Response is the header of one raw response.
type Response struct {
	Status      uint8
	UploadBytes uint64 // upload bytes the server received
	UploadNanos uint64 // server time from first to last upload byte
	Size        uint64 // body bytes following the header
}

// ErrShort is returned by the parsers when fewer bytes than a header are given.
var ErrShort = errors.New("raw: header too short")

// HeaderError reports a malformed or out-of-bounds header.
type HeaderError struct {
	Msg string
}

func (e *HeaderError) Error() string { return "raw: " + e.Msg }

func headerErr(format string, a ...any) error { return &HeaderError{Msg: fmt.Sprintf(format, a...)} }

// checkStart checks what both headers start with: b holds at least size
// bytes, begins with magic and has this Version; what ("request" or
// "response") names the header in errors.
func checkStart(b []byte, size int, magic, what string) error {
	if len(b) < size {
		return ErrShort
	}
	if string(b[:2]) != magic {
		return headerErr("bad %s magic %q (not a quicbench raw protocol %s)", what, b[:2], what)
	}
	if b[2] != Version {
		return headerErr("unsupported %s version %d (want %d)", what, b[2], Version)
	}
	return nil
}

// AppendRequest appends the encoded header of r to b.
func AppendRequest(b []byte, r Request) []byte {
	b = append(b, 'Q', 'B', Version, 0)
	b = binary.BigEndian.AppendUint64(b, r.Size)
	return binary.BigEndian.AppendUint64(b, r.Upload)
}

// ParseRequest decodes a request header from the first RequestHeaderSize
// bytes of b and validates it.
func ParseRequest(b []byte) (Request, error) {
	if err := checkStart(b, RequestHeaderSize, "QB", "request"); err != nil {
		return Request{}, err
	}
	if b[3] != 0 {
		return Request{}, headerErr("request flags %#02x, want 0", b[3])
	}
	r := Request{
		Size:   binary.BigEndian.Uint64(b[4:12]),
		Upload: binary.BigEndian.Uint64(b[12:20]),
	}
	if r.Size > MaxSize {
		return Request{}, headerErr("requested response size %d exceeds the maximum %d", r.Size, MaxSize)
	}
	if r.Upload > MaxSize {
		return Request{}, headerErr("upload size %d exceeds the maximum %d", r.Upload, MaxSize)
	}
	return r, nil
}

// ReadRequest reads and parses one request header from r. It returns io.EOF
// when r ends cleanly before the first header byte.
func ReadRequest(r io.Reader) (Request, error) {
	var b [RequestHeaderSize]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return Request{}, fmt.Errorf("raw: connection ended inside a request header: %w", err)
		}
		return Request{}, err
	}
	return ParseRequest(b[:])
}

// AppendResponse appends the encoded header of r to b.
func AppendResponse(b []byte, r Response) []byte {
	b = append(b, 'q', 'b', Version, r.Status)
	b = binary.BigEndian.AppendUint64(b, r.UploadBytes)
	b = binary.BigEndian.AppendUint64(b, r.UploadNanos)
	return binary.BigEndian.AppendUint64(b, r.Size)
}

// ParseResponse decodes a response header from the first ResponseHeaderSize
// bytes of b.
func ParseResponse(b []byte) (Response, error) {
	if err := checkStart(b, ResponseHeaderSize, "qb", "response"); err != nil {
		return Response{}, err
	}
	r := Response{
		Status:      b[3],
		UploadBytes: binary.BigEndian.Uint64(b[4:12]),
		UploadNanos: binary.BigEndian.Uint64(b[12:20]),
		Size:        binary.BigEndian.Uint64(b[20:28]),
	}
	if r.Size > MaxSize {
		return Response{}, headerErr("response body size %d exceeds the maximum %d", r.Size, MaxSize)
	}
	return r, nil
}
