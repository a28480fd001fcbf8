// Package ctl is the control channel between the runner and its helper
// processes inside the namespaces (the client agent): JSON lines over the
// child's stdin and stdout, one request and one response at a time.
package ctl

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxLine bounds one message (timelines of a large transfer can be big).
const maxLine = 256 << 20

type request struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Body json.RawMessage `json:"body,omitempty"`
}

type response struct {
	ID    uint64          `json:"id"`
	Error string          `json:"error,omitempty"`
	Body  json.RawMessage `json:"body,omitempty"`
}

// Client calls operations on a peer that runs Serve.
type Client struct {
	mu   sync.Mutex
	w    io.Writer
	r    *bufio.Reader
	next uint64
}

// NewClient returns a client writing requests to w and reading responses from r.
func NewClient(w io.Writer, r io.Reader) *Client {
	return &Client{w: w, r: bufio.NewReaderSize(r, 1<<16)}
}

// RemoteError is an error returned by the peer's handler.
type RemoteError struct{ Msg string }

func (e *RemoteError) Error() string { return e.Msg }

// Call sends op with body (marshalled as JSON) and decodes the response into
// out (which may be nil). If ctx ends first, Call returns ctx's error; the
// caller must then treat the channel as broken (the peer may still answer).
func (c *Client) Call(ctx context.Context, op string, body, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	req := request{ID: c.next, Op: op}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("ctl: encode %s: %w", op, err)
		}
		req.Body = b
	}
	line, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("ctl: encode %s: %w", op, err)
	}
	if _, err := c.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("ctl: send %s: %w", op, err)
	}
	type result struct {
		resp response
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := readLine(c.r)
		if err != nil {
			ch <- result{err: err}
			return
		}
		var resp response
		if err := json.Unmarshal(b, &resp); err != nil {
			ch <- result{err: fmt.Errorf("malformed response %.80q: %w", b, err)}
			return
		}
		ch <- result{resp: resp}
	}()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("ctl: %s: %w", op, r.err)
		}
		if r.resp.ID != req.ID {
			return fmt.Errorf("ctl: %s: response id %d, want %d", op, r.resp.ID, req.ID)
		}
		if r.resp.Error != "" {
			return &RemoteError{Msg: r.resp.Error}
		}
		if out != nil && len(r.resp.Body) > 0 {
			if err := json.Unmarshal(r.resp.Body, out); err != nil {
				return fmt.Errorf("ctl: decode %s response: %w", op, err)
			}
		}
		return nil
	}
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		part, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		buf = append(buf, part...)
		if len(buf) > maxLine {
			return nil, errors.New("message too long")
		}
		if !isPrefix {
			return buf, nil
		}
	}
}

// Handler answers one operation. body is the raw JSON body of the request.
type Handler func(ctx context.Context, op string, body json.RawMessage) (any, error)

// Serve reads requests from r until EOF or ctx ends and answers each with h,
// in order. It returns nil at EOF.
func Serve(ctx context.Context, r io.Reader, w io.Writer, h Handler) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ctl: read: %w", err)
		}
		var req request
		var resp response
		if err := json.Unmarshal(line, &req); err != nil {
			resp.Error = fmt.Sprintf("malformed request: %v", err)
		} else {
			resp.ID = req.ID
			out, herr := h(ctx, req.Op, req.Body)
			if herr != nil {
				resp.Error = herr.Error()
			} else if out != nil {
				b, merr := json.Marshal(out)
				if merr != nil {
					resp.Error = fmt.Sprintf("encode response: %v", merr)
				} else {
					resp.Body = b
				}
			}
		}
		b, _ := json.Marshal(resp)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("ctl: write: %w", err)
		}
	}
}
