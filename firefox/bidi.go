package firefox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

// maxMessage bounds one BiDi message from Firefox (a site's timing entries
// stay far below it).
const maxMessage = 64 << 20

// bidiConn is a WebDriver BiDi session over a WebSocket: commands are sent
// with increasing ids and their responses matched by id; events are not
// subscribed to and ignored.
type bidiConn struct {
	ws *websocket.Conn

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan bidiReply
	readErr error         // why the read loop ended
	done    chan struct{} // closed when the read loop ends

	// events receives the events subscribed to (har.go); nil ignores them.
	events func(method string, params json.RawMessage)
}

// bidiReply is a command's response: the result on success, else the
// error code and message.
type bidiReply struct {
	Type    string          `json:"type"` // "success", "error" or "event"
	ID      *int64          `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   string          `json:"error"`
	Message string          `json:"message"`
}

// CommandError is a BiDi command that Firefox answered with an error.
type CommandError struct {
	Method  string // e.g. "browsingContext.navigate"
	Code    string // BiDi error code, e.g. "unknown error"
	Message string // Firefox's message, e.g. "NS_ERROR_CONNECTION_REFUSED"
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("firefox: %s: %s: %s", e.Method, e.Code, e.Message)
}

// dialBiDi opens the WebSocket of a BiDi session at wsURL
// (ws://127.0.0.1:PORT/session). With netns set, the TCP connection is made
// inside that network namespace (a socket keeps the namespace it was
// created in).
func dialBiDi(ctx context.Context, wsURL, netns string) (*bidiConn, error) {
	tr := &http.Transport{Proxy: nil}
	if netns != "" {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			return dialInNetNS(ctx, netns, network, addr)
		}
	}
	ws, _, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, fmt.Errorf("firefox: connecting to WebDriver BiDi at %s: %w", wsURL, err)
	}
	ws.SetReadLimit(maxMessage)
	c := &bidiConn{ws: ws, pending: map[int64]chan bidiReply{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// dialInNetNS dials addr from inside the network namespace at path, on a
// locked OS thread that enters the namespace and returns to its own one.
func dialInNetNS(ctx context.Context, path, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer orig.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: err}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("entering %s: %w", path, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		// Only a thread back in its own namespace may return to the pool;
		// otherwise it stays locked and ends with this goroutine.
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

func (c *bidiConn) readLoop() {
	var err error
	for {
		var data []byte
		_, data, err = c.ws.Read(context.Background())
		if err != nil {
			break
		}
		var r bidiReply
		if json.Unmarshal(data, &r) != nil || r.ID == nil {
			c.event(r.Type, data) // an event, or a message this client does not use
			continue
		}
		c.mu.Lock()
		ch := c.pending[*r.ID]
		delete(c.pending, *r.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
	c.mu.Lock()
	c.readErr = err
	c.mu.Unlock()
	close(c.done)
}

// call sends one command and decodes its result into out (unless nil). It
// returns a *CommandError when Firefox answered with an error, ctx's error
// when ctx ended first.
func (c *bidiConn) call(ctx context.Context, method string, params, out any) error {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan bidiReply, 1)
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}
	msg, err := json.Marshal(struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params"`
	}{id, method, params})
	if err != nil {
		forget()
		return fmt.Errorf("firefox: %s: %w", method, err)
	}
	if err := c.ws.Write(ctx, websocket.MessageText, msg); err != nil {
		forget()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("firefox: sending %s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.Type == "error" {
			return &CommandError{Method: method, Code: r.Error, Message: r.Message}
		}
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				return fmt.Errorf("firefox: %s: decoding the result: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return ctx.Err()
	case <-c.done:
		forget()
		c.mu.Lock()
		err := c.readErr
		c.mu.Unlock()
		return fmt.Errorf("firefox: %s: the BiDi connection closed: %w", method, err)
	}
}

// close closes the WebSocket without the closing handshake (the browser is
// about to be killed) and waits for the read loop to end.
func (c *bidiConn) close() {
	_ = c.ws.CloseNow()
	<-c.done
}

// errClosed is returned by a Session that was closed.
var errClosed = errors.New("firefox: the session is closed")
