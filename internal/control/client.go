package control

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"sync"
)

// Client is the driving end of a session with one child process of a
// role: it writes requests to the child's input and reads the answers
// from its output. It is safe for concurrent use; calls are made one at a
// time.
type Client struct {
	role Role
	w    io.Writer
	r    *bufio.Reader

	mu      sync.Mutex // one call at a time; guards what follows
	next    uint64
	pending chan received // the line being read, if a call gave up on it
}

// received is one line read from the child, decoded.
type received struct {
	m   message
	err error
}

// NewClient returns a client of role writing requests to w (the child's
// standard input) and reading answers from r (its standard output).
func NewClient(role Role, w io.Writer, r io.Reader) *Client {
	return &Client{role: role, w: w, r: bufio.NewReaderSize(r, 64<<10)}
}

// receive returns the child's next line, or ctx's error if ctx ends first.
// The line is read in a goroutine of its own; if ctx ends first, the next
// receive waits for the same line, so that only one goroutine ever reads.
func (c *Client) receive(ctx context.Context) (message, error) {
	if c.pending == nil {
		ch := make(chan received, 1)
		c.pending = ch
		go func() {
			var r received
			b, err := readLine(c.r)
			if err == nil {
				if err = json.Unmarshal(b, &r.m); err != nil {
					err = errorf("malformed answer %q: %w", truncate(b, 200), err)
				}
			}
			r.err = err
			ch <- r
		}()
	}
	select {
	case <-ctx.Done():
		return message{}, ctx.Err()
	case r := <-c.pending:
		c.pending = nil
		return r.m, r.err
	}
}

// Hello reads the child's hello line into out (which may be nil). It is
// the first thing to read from a role whose serving side sends one.
func (c *Client) Hello(ctx context.Context, out any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.receive(ctx)
	if err != nil {
		return errorf("no hello from the %s: %w", c.role, err)
	}
	if m.ID != 0 || m.Event != helloEvent {
		return errorf("the %s's first line is not its hello: %+v", c.role, m)
	}
	return decodeInto(m.Body, out, "hello")
}

// Call sends op with req (marshalled as JSON, nil for no body) and decodes
// the answer's body into resp (which may be nil). An answer with an error
// is a *RemoteError. If ctx ends first, Call returns ctx's error; the
// caller must then treat the session as broken (the child may still
// answer).
func (c *Client) Call(ctx context.Context, op Op, req, resp any) error {
	return c.CallNotes(ctx, op, req, resp, nil)
}

// CallNotes is Call with note called, in the calling goroutine, for each
// note the handler sends before its answer (Notify).
func (c *Client) CallNotes(ctx context.Context, op Op, req, resp any, note func(event string, body json.RawMessage)) error {
	if !c.role.serves(op) {
		return errorf("%s is not an operation of the %s", op, c.role)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	id := c.next
	body, err := encodeBody(req)
	if err != nil {
		return errorf("encode %s: %w", op, err)
	}
	if err := writeLine(c.w, request{ID: id, Op: op, Body: body}); err != nil {
		return errorf("send %s: %w", op, err)
	}
	for {
		m, err := c.receive(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return errorf("no answer to %s: %w", op, err)
		}
		if m.ID != id {
			return errorf("%s: answer id %d, want %d", op, m.ID, id)
		}
		if m.Event != "" {
			if note != nil {
				note(m.Event, m.Body)
			}
			continue
		}
		if m.Error != "" || !m.OK {
			return &RemoteError{Op: op, Msg: m.Error}
		}
		return decodeInto(m.Body, resp, string(op))
	}
}

// decodeInto decodes body into out, if both are there.
func decodeInto(body json.RawMessage, out any, what string) error {
	if out == nil || len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return errorf("decode %s: %w", what, err)
	}
	return nil
}
