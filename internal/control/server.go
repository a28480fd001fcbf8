package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// Errors of requests, which Serve returns wrapped when they concern the
// session's required first request (Server.First).
var (
	// ErrNoRequest is the error of an input that ended, or could not be
	// read, before the first request.
	ErrNoRequest = errors.New("no request")
	// ErrMalformed is the error of a request that is not JSON, whose body
	// does not decode into its operation's request type, or that is not
	// the required first operation. Serve answers it with an error and
	// goes on, unless it was the first request.
	ErrMalformed = errors.New("malformed request")
)

// handler answers one request's body.
type handler func(ctx context.Context, body json.RawMessage) (any, error)

// Server is the serving end of a role: its handlers, one per operation of
// the role in Table.
type Server struct {
	// Hello, if not nil, is sent as the hello line before any request is
	// read.
	Hello any

	role     Role
	handlers map[Op]handler
	first    Op
	final    map[Op]bool
}

// NewServer returns a server of role with no handlers yet.
func NewServer(role Role) *Server {
	return &Server{role: role, handlers: map[Op]handler{}, final: map[Op]bool{}}
}

// Handle makes fn answer op on s: the request's body decodes into a Req
// (an absent body leaves it zero) and fn's Resp is the answer's body. It
// panics if op is not an operation of s's role or already has a handler:
// both are programming errors.
func Handle[Req, Resp any](s *Server, op Op, fn func(context.Context, Req) (Resp, error)) {
	if !s.role.serves(op) {
		panic(fmt.Sprintf("control: %s is not an operation of the %s", op, s.role))
	}
	if _, dup := s.handlers[op]; dup {
		panic(fmt.Sprintf("control: %s handled twice", op))
	}
	s.handlers[op] = func(ctx context.Context, body json.RawMessage) (any, error) {
		var req Req
		if len(body) > 0 {
			if err := json.Unmarshal(body, &req); err != nil {
				return nil, fmt.Errorf("%w for %s: %v", ErrMalformed, op, err)
			}
		}
		return fn(ctx, req)
	}
}

// First requires the session's first request to be op: if the input ends
// before it, or it is malformed or another operation, Serve answers it
// and ends with an error (ErrNoRequest or ErrMalformed). An error of op's
// handler is answered as usual.
func (s *Server) First(op Op) { s.first = op }

// Final makes the answer to op end the session: Serve returns nil after
// writing it.
func (s *Server) Final(op Op) { s.final[op] = true }

// Ops returns the operations s has handlers for, in Table's order.
func (s *Server) Ops() []Op {
	var ops []Op
	for _, op := range Table[s.role] {
		if s.handlers[op] != nil {
			ops = append(ops, op)
		}
	}
	return ops
}

// notifier is what Notify finds in a handler's context.
type notifier struct {
	mu sync.Mutex
	w  io.Writer
	id uint64
}

type notifierKey struct{}

// Notify sends a note about the request that ctx is the handler's context
// of, ahead of its answer (Client.CallNotes). Outside a handler it does
// nothing.
func Notify(ctx context.Context, event string, body any) error {
	n, _ := ctx.Value(notifierKey{}).(*notifier)
	if n == nil {
		return nil
	}
	if event == "" {
		return errorf("a note needs an event")
	}
	b, err := encodeBody(body)
	if err != nil {
		return errorf("encode note %s: %w", event, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return writeLine(n.w, message{ID: n.id, Event: event, Body: b})
}

// Serve sends the hello, if any, then answers the requests read from r,
// one at a time and in order, on w until r ends or a Final operation has
// been answered (both return nil), or ctx ends (ctx's error). A malformed
// request or an unknown operation is answered with an error and the
// session goes on, except as First says.
func (s *Server) Serve(ctx context.Context, r io.Reader, w io.Writer) error {
	if s.Hello != nil {
		b, err := encodeBody(s.Hello)
		if err == nil {
			err = writeLine(w, message{Event: helloEvent, Body: b})
		}
		if err != nil {
			return errorf("writing the hello: %w", err)
		}
	}
	done := make(chan struct{})
	defer close(done)
	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() {
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			line, err := readLine(br)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case lines <- line:
			case <-done:
				return
			}
		}
	}()
	first := s.first != ""
	for {
		var line []byte
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			switch {
			case first:
				return fmt.Errorf("%w (%s): %v", ErrNoRequest, s.first, err)
			case errors.Is(err, io.EOF):
				return nil
			}
			return errorf("reading requests: %w", err)
		case line = <-lines:
		}
		if len(line) == 0 {
			continue
		}
		var want Op
		if first {
			want = s.first
		}
		op, m, err := s.answer(ctx, w, line, want)
		if werr := writeLine(w, m); werr != nil {
			return errorf("writing the answer: %w", werr)
		}
		if first && errors.Is(err, ErrMalformed) {
			return err
		}
		first = false
		if s.final[op] && s.handlers[op] != nil {
			return nil
		}
	}
}

// answer handles one request line, which must be an op request if want
// is set, and returns its operation and answer; err is the reason of an
// error answer.
func (s *Server) answer(ctx context.Context, w io.Writer, line []byte, want Op) (Op, message, error) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		err = fmt.Errorf("%w %q: %v", ErrMalformed, truncate(line, 80), err)
		return "", message{Error: err.Error()}, err
	}
	if want != "" && req.Op != want {
		err := fmt.Errorf("%w: %q before %s", ErrMalformed, req.Op, want)
		return req.Op, message{ID: req.ID, Error: err.Error()}, err
	}
	h := s.handlers[req.Op]
	if h == nil {
		err := fmt.Errorf("unknown op %q (want %s)", req.Op, listOps(s.Ops()))
		return req.Op, message{ID: req.ID, Error: err.Error()}, err
	}
	out, err := h(context.WithValue(ctx, notifierKey{}, &notifier{w: w, id: req.ID}), req.Body)
	if err != nil {
		return req.Op, message{ID: req.ID, Error: err.Error()}, err
	}
	b, err := encodeBody(out)
	if err != nil {
		err = fmt.Errorf("encode the answer to %s: %w", req.Op, err)
		return req.Op, message{ID: req.ID, Error: err.Error()}, err
	}
	return req.Op, message{ID: req.ID, OK: true, Body: b}, nil
}

// Check returns an error unless s handles exactly its role's operations
// in Table: the serving sides' tests call it.
func (s *Server) Check() error {
	var missing, extra []Op
	for _, op := range Table[s.role] {
		if s.handlers[op] == nil {
			missing = append(missing, op)
		}
	}
	for op := range s.handlers {
		if !slices.Contains(Table[s.role], op) {
			extra = append(extra, op)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		slices.Sort(extra)
		return errorf("the %s handles %v beyond its table and not %v of it", s.role, extra, missing)
	}
	return nil
}
