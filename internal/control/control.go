// Package control is the one protocol between quicbench and the child
// processes it drives over their standard input and output (package
// child starts them): the run's server and client agent, and calibrate's
// bulk servers, bulk clients and soaker. Table lists every role's
// operations; both ends import it.
//
// The framing is JSON lines. A request is {"id":N,"op":"...","body":...};
// its answer is {"id":N,"ok":true,"body":...} or {"id":N,"error":"..."},
// possibly after notes {"id":N,"event":"...","body":...} that a handler
// sends while it works (Notify). A serving side may first print a hello,
// {"id":0,"event":"ready","body":...}, once it is ready. Requests are
// answered one at a time, in order; the end of the input ends the session.
package control

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxLine bounds one message (the timelines of a large transfer can be
// big). A variable for tests.
var maxLine = 256 << 20

// helloEvent is the event of the hello line.
const helloEvent = "ready"

// request is one request line.
type request struct {
	ID   uint64          `json:"id"`
	Op   Op              `json:"op"`
	Body json.RawMessage `json:"body,omitempty"`
}

// message is one line of a serving side: the final answer to a request
// (Event empty), a note before it, or the hello.
type message struct {
	ID    uint64          `json:"id"`
	OK    bool            `json:"ok,omitempty"`
	Event string          `json:"event,omitempty"`
	Error string          `json:"error,omitempty"`
	Body  json.RawMessage `json:"body,omitempty"`
}

// errTooLong is the error of a line longer than maxLine.
var errTooLong = errors.New("message too long")

// readLine reads one line without its end, up to maxLine bytes.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		part, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		buf = append(buf, part...)
		if len(buf) > maxLine {
			return nil, errTooLong
		}
		if !isPrefix {
			return buf, nil
		}
	}
}

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// encodeBody marshals a body; nil is no body.
func encodeBody(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// truncate returns b as a string, cut to n bytes.
func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// listOps spells ops for an error message: "a, b or c".
func listOps(ops []Op) string {
	s := ""
	for i, o := range ops {
		switch {
		case i == 0:
		case i == len(ops)-1:
			s += " or "
		default:
			s += ", "
		}
		s += string(o)
	}
	return s
}

// RemoteError is an error the serving side answered a request with.
type RemoteError struct {
	Op  Op     // the request's operation
	Msg string // the serving side's message
}

// Error returns the serving side's message.
func (e *RemoteError) Error() string { return e.Msg }

// errorf formats an error of the protocol itself.
func errorf(format string, args ...any) error {
	return fmt.Errorf("control: "+format, args...)
}
