package raw

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/quicbench/quicbench/endpoint/content"
)

func TestRequestRoundTrip(t *testing.T) {
	for _, r := range []Request{{}, {Size: 1, Upload: 0}, {Size: 1 << 30, Upload: 12345}, {Size: MaxSize, Upload: MaxSize}} {
		b := AppendRequest(nil, r)
		if len(b) != RequestHeaderSize {
			t.Fatalf("header of %d bytes", len(b))
		}
		got, err := ParseRequest(b)
		if err != nil || got != r {
			t.Fatalf("ParseRequest(AppendRequest(%+v)) = %+v, %v", r, got, err)
		}
	}
}

func TestResponseRoundTrip(t *testing.T) {
	r := Response{Status: StatusOK, UploadBytes: 7, UploadNanos: 99, Size: 1 << 20}
	b := AppendResponse(nil, r)
	if len(b) != ResponseHeaderSize {
		t.Fatalf("header of %d bytes", len(b))
	}
	got, err := ParseResponse(b)
	if err != nil || got != r {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := ParseResponse(b[:27]); err != ErrShort {
		t.Fatalf("short: %v", err)
	}
	bad := append([]byte(nil), b...)
	bad[0] = 'Q'
	if _, err := ParseResponse(bad); err == nil {
		t.Fatal("request magic accepted as response")
	}
}

func TestParseRequestRejects(t *testing.T) {
	ok := AppendRequest(nil, Request{Size: 10})
	cases := map[string]func([]byte){
		"magic":   func(b []byte) { b[0] = 'X' },
		"version": func(b []byte) { b[2] = 2 },
		"flags":   func(b []byte) { b[3] = 1 },
		"size":    func(b []byte) { binary.BigEndian.PutUint64(b[4:], MaxSize+1) },
		"upload":  func(b []byte) { binary.BigEndian.PutUint64(b[12:], MaxSize+1) },
	}
	for name, mutate := range cases {
		b := append([]byte(nil), ok...)
		mutate(b)
		_, err := ParseRequest(b)
		var he *HeaderError
		if !errors.As(err, &he) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := ParseRequest(ok[:19]); err != ErrShort {
		t.Errorf("short header: %v", err)
	}
}

type pipe struct {
	in  io.Reader
	out bytes.Buffer
}

func (p *pipe) Read(b []byte) (int, error)  { return p.in.Read(b) }
func (p *pipe) Write(b []byte) (int, error) { return p.out.Write(b) }

func TestServeSequentialRequests(t *testing.T) {
	var in bytes.Buffer
	in.Write(AppendRequest(nil, Request{Size: 100000, Upload: 0}))
	in.Write(AppendRequest(nil, Request{Size: 3, Upload: 5000}))
	_, _ = content.WriteBody(&in, 5000)
	in.Write(AppendRequest(nil, Request{}))
	p := &pipe{in: &in}
	if err := Serve(p, false); err != nil {
		t.Fatal(err)
	}
	out := p.out.Bytes()
	for i, want := range []Response{{Size: 100000}, {UploadBytes: 5000, Size: 3}, {}} {
		r, err := ParseResponse(out)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		nanos := r.UploadNanos
		r.UploadNanos = 0
		if r != want {
			t.Fatalf("response %d = %+v, want %+v", i, r, want)
		}
		if want.UploadBytes == 0 && nanos != 0 {
			t.Fatalf("response %d: upload time %d without upload", i, nanos)
		}
		out = out[ResponseHeaderSize:]
		var v content.Verifier
		if err := v.Check(out[:r.Size]); err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		out = out[r.Size:]
	}
	if len(out) != 0 {
		t.Fatalf("%d trailing bytes", len(out))
	}
}

func TestServeSingleStopsAfterOne(t *testing.T) {
	var in bytes.Buffer
	in.Write(AppendRequest(nil, Request{Size: 10}))
	in.Write(AppendRequest(nil, Request{Size: 10}))
	p := &pipe{in: &in}
	if err := Serve(p, true); err != nil {
		t.Fatal(err)
	}
	if p.out.Len() != ResponseHeaderSize+10 {
		t.Fatalf("wrote %d bytes", p.out.Len())
	}
}

func TestServeErrors(t *testing.T) {
	// A malformed header is answered with StatusBadRequest.
	p := &pipe{in: strings.NewReader("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}
	err := Serve(p, false)
	var he *HeaderError
	if !errors.As(err, &he) {
		t.Fatalf("err = %v", err)
	}
	r, perr := ParseResponse(p.out.Bytes())
	if perr != nil || r.Status != StatusBadRequest || r.Size != 0 {
		t.Fatalf("answer %+v, %v", r, perr)
	}
	// Truncated upload.
	var in bytes.Buffer
	in.Write(AppendRequest(nil, Request{Size: 1, Upload: 100}))
	in.Write(make([]byte, 40))
	err = Serve(&pipe{in: &in}, false)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "40 of 100") {
		t.Fatalf("truncated upload: %v", err)
	}
	// Truncated header.
	err = Serve(&pipe{in: bytes.NewReader(AppendRequest(nil, Request{})[:7])}, false)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated header: %v", err)
	}
}

func FuzzParseRequest(f *testing.F) {
	f.Add(AppendRequest(nil, Request{Size: 1 << 20, Upload: 10}))
	f.Add([]byte("QB\x01\x00"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(bytes.Repeat([]byte{0xff}, 20))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRequest(b)
		if err != nil {
			if len(b) >= RequestHeaderSize {
				var he *HeaderError
				if !errors.As(err, &he) {
					t.Fatalf("full header rejected with untyped error %v", err)
				}
			} else if err != ErrShort {
				t.Fatalf("short input: %v", err)
			}
			return
		}
		if r.Size > MaxSize || r.Upload > MaxSize {
			t.Fatalf("accepted out-of-bounds request %+v", r)
		}
		if enc := AppendRequest(nil, r); !bytes.Equal(enc, b[:RequestHeaderSize]) {
			t.Fatalf("re-encoding %+v gives %x, input %x", r, enc, b[:RequestHeaderSize])
		}
		r2, err := ReadRequest(bytes.NewReader(b))
		if err != nil || r2 != r {
			t.Fatalf("ReadRequest disagrees: %+v, %v", r2, err)
		}
	})
}
