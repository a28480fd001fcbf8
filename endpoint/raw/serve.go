package raw

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quicbench/quicbench/endpoint/content"
)

// Serve answers raw requests read from rw. With single set it answers one
// request and returns (QUIC: one request per stream); otherwise it answers
// requests until rw ends cleanly between two requests, which returns nil
// (TCP: a connection carries requests in sequence). A malformed header is
// answered with StatusBadRequest and returned as an error; the caller then
// closes the connection or stream.
func Serve(rw io.ReadWriter, single bool) error {
	buf := make([]byte, 64<<10)
	for {
		req, err := ReadRequest(rw)
		if err != nil {
			if err == io.EOF {
				return nil // clean end between requests
			}
			var he *HeaderError
			if errors.As(err, &he) {
				_, _ = rw.Write(AppendResponse(nil, Response{Status: StatusBadRequest}))
			}
			return err
		}
		var got uint64
		var first time.Time
		for got < req.Upload {
			n := uint64(len(buf))
			if rem := req.Upload - got; rem < n {
				n = rem
			}
			m, err := rw.Read(buf[:n])
			if m > 0 && got == 0 {
				first = time.Now()
			}
			got += uint64(m)
			if err != nil && got < req.Upload {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return fmt.Errorf("raw: upload ended after %d of %d bytes: %w", got, req.Upload, err)
			}
		}
		var nanos uint64
		if got > 0 {
			nanos = uint64(time.Since(first))
		}
		hdr := AppendResponse(make([]byte, 0, ResponseHeaderSize), Response{
			Status: StatusOK, UploadBytes: got, UploadNanos: nanos, Size: req.Size,
		})
		if _, err := rw.Write(hdr); err != nil {
			return err
		}
		if _, err := content.WriteBody(rw, int64(req.Size)); err != nil {
			return err
		}
		if single {
			return nil
		}
	}
}
