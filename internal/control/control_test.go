package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// testRole is the role of these tests, added to Table by init below, so
// that they do not depend on a real role's operations.
const testRole Role = "test"

const (
	opAdd  Op = "add"
	opFail Op = "fail"
	opLen  Op = "len"
	opWalk Op = "walk"
	opBye  Op = "bye"
)

func init() { Table[testRole] = []Op{opAdd, opFail, opLen, opWalk, opBye} }

// testServer handles the test role's operations.
func testServer() *Server {
	s := NewServer(testRole)
	Handle(s, opAdd, func(_ context.Context, in [2]int) (int, error) { return in[0] + in[1], nil })
	Handle(s, opFail, func(context.Context, struct{}) (struct{}, error) { return struct{}{}, errors.New("it failed") })
	Handle(s, opLen, func(_ context.Context, s string) (int, error) { return len(s), nil })
	Handle(s, opWalk, func(ctx context.Context, n int) (string, error) {
		for i := range n {
			if err := Notify(ctx, "step", i); err != nil {
				return "", err
			}
		}
		return "there", nil
	})
	Handle(s, opBye, func(context.Context, struct{}) (string, error) { return "bye", nil })
	s.Final(opBye)
	return s
}

// pipePair runs s on pipes and returns a client of it and a function that
// ends the session and returns Serve's error.
func pipePair(t *testing.T, s *Server) (*Client, func() error) {
	t.Helper()
	reqR, reqW := io.Pipe()
	respR, respW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), reqR, respW); respW.Close() }()
	return NewClient(testRole, reqW, respR), func() error { reqW.Close(); return <-done }
}

func TestCallRoundTrip(t *testing.T) {
	c, stop := pipePair(t, testServer())
	ctx := context.Background()
	var sum int
	if err := c.Call(ctx, opAdd, [2]int{2, 3}, &sum); err != nil || sum != 5 {
		t.Fatalf("add: %v %d", err, sum)
	}
	err := c.Call(ctx, opFail, nil, nil)
	var re *RemoteError
	if !errors.As(err, &re) || re.Msg != "it failed" || re.Op != opFail {
		t.Fatalf("fail: got %v", err)
	}
	big := strings.Repeat("x", 1<<20)
	var n int
	if err := c.Call(ctx, opLen, big, &n); err != nil || n != len(big) {
		t.Fatalf("1 MiB message: err %v, peer saw %d bytes, want %d", err, n, len(big))
	}
	var steps []string
	var there string
	err = c.CallNotes(ctx, opWalk, 3, &there, func(event string, body json.RawMessage) {
		steps = append(steps, event+" "+string(body))
	})
	if err != nil || there != "there" || strings.Join(steps, ",") != "step 0,step 1,step 2" {
		t.Fatalf("walk: %v %q, notes %q", err, there, steps)
	}
	// The session goes on after an error answer, and ends with its input.
	if err := c.Call(ctx, opAdd, [2]int{1, 1}, &sum); err != nil || sum != 2 {
		t.Fatalf("add after the rest: %v %d", err, sum)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
}

// A Final operation ends the session once answered.
func TestFinal(t *testing.T) {
	c, stop := pipePair(t, testServer())
	var bye string
	if err := c.Call(context.Background(), opBye, nil, &bye); err != nil || bye != "bye" {
		t.Fatalf("bye: %v %q", err, bye)
	}
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := c.Call(context.Background(), opAdd, [2]int{1, 1}, nil); err == nil {
		t.Fatal("a call after the session ended succeeded")
	}
}

// The raw session: the hello first, malformed lines, unknown operations
// and bad bodies answered, empty lines skipped, and nil at the end of the
// input.
func TestServeLines(t *testing.T) {
	s := testServer()
	s.Hello = map[string]int{"port": 7}
	in := "not json\n\n" +
		`{"id":1,"op":"reboot"}` + "\n" +
		`{"id":2,"op":"add","body":"two"}` + "\n" +
		`{"id":3,"op":"walk","body":1}` + "\n" +
		`{"op":"add","body":[1,2]}` + "\n"
	var out strings.Builder
	if err := s.Serve(context.Background(), strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"id":0,"event":"ready","body":{"port":7}}`,
		`{"id":0,"error":"malformed request \"not json\": invalid character 'o' in literal null (expecting 'u')"}`,
		`{"id":1,"error":"unknown op \"reboot\" (want add, fail, len, walk or bye)"}`,
		`{"id":2,"error":"malformed request for add: json: cannot unmarshal string into Go value of type [2]int"}`,
		`{"id":3,"event":"step","body":0}`,
		`{"id":3,"ok":true,"body":"there"}`,
		`{"id":0,"ok":true,"body":3}`,
	}
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); !slices.Equal(got, want) {
		t.Errorf("output:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHello(t *testing.T) {
	s := testServer()
	s.Hello = map[string]int{"port": 7}
	c, stop := pipePair(t, s)
	var h struct{ Port int }
	if err := c.Hello(context.Background(), &h); err != nil || h.Port != 7 {
		t.Fatalf("hello: %v %+v", err, h)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// A line that is not a hello.
	c = NewClient(testRole, io.Discard, strings.NewReader(`{"id":1,"ok":true}`+"\n"))
	if err := c.Hello(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "not its hello") {
		t.Errorf("hello from an answer: %v", err)
	}
}

// First: the input ending before the first request, a malformed one and
// another operation end the session with an error; the first request's
// own error does not.
func TestFirst(t *testing.T) {
	for _, c := range []struct {
		in   string
		want error
	}{
		{"", ErrNoRequest},
		{"nope\n", ErrMalformed},
		{`{"id":1,"op":"add","body":"x"}` + "\n", ErrMalformed},
		{`{"id":1,"op":"len","body":"x"}` + "\n", ErrMalformed},
		{`{"id":1,"op":"reboot"}` + "\n", ErrMalformed},
		{`{"id":1,"op":"add","body":[1,2]}` + "\n" + `{"id":2,"op":"reboot"}` + "\n", nil},
	} {
		s := testServer()
		s.First(opAdd)
		var out strings.Builder
		err := s.Serve(context.Background(), strings.NewReader(c.in), &out)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("input %q: %v, want %v", c.in, err, c.want)
		}
	}
	s := testServer()
	s.First(opFail)
	if err := s.Serve(context.Background(), strings.NewReader(`{"id":1,"op":"fail"}`+"\n"), io.Discard); err != nil {
		t.Errorf("a first request's handler error ended the session: %v", err)
	}
}

func TestCallHonoursContext(t *testing.T) {
	reqR, reqW := io.Pipe()
	go io.Copy(io.Discard, reqR)
	silent, _ := io.Pipe() // a peer that never answers
	c := NewClient(testRole, reqW, silent)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Call(ctx, opAdd, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if err := c.Hello(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("hello: got %v, want context.Canceled", err)
	}
	// Serve returns ctx's error, whether ctx ends while it waits for a
	// request or ended before.
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- testServer().Serve(ctx, pr, io.Discard) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Serve: got %v, want context.Canceled", err)
	}
}

// Neither end accepts a line longer than maxLine: Serve ends with an
// error, and so does the call.
func TestOversizedLine(t *testing.T) {
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 1000
	err := testServer().Serve(context.Background(), strings.NewReader(`{"id":1,"op":"len","body":"`+strings.Repeat("x", 2000)+`"}`+"\n"), io.Discard)
	if !errors.Is(err, errTooLong) {
		t.Errorf("Serve of a long line: %v", err)
	}
	long := `{"id":1,"ok":true,"body":"` + strings.Repeat("x", 2000) + `"}` + "\n"
	c := NewClient(testRole, io.Discard, strings.NewReader(long))
	if err := c.Call(context.Background(), opLen, "", nil); !errors.Is(err, errTooLong) {
		t.Errorf("Call answered by a long line: %v", err)
	}
}

// A client sends only its role's operations, and checks the answer's id.
func TestClientChecks(t *testing.T) {
	c := NewClient(RoleAgent, io.Discard, strings.NewReader(""))
	if err := c.Call(context.Background(), Quit, nil, nil); err == nil || !strings.Contains(err.Error(), "not an operation of the agent") {
		t.Errorf("quit to the agent: %v", err)
	}
	c = NewClient(testRole, io.Discard, strings.NewReader(`{"id":9,"ok":true}`+"\n"+"junk\n"))
	if err := c.Call(context.Background(), opAdd, nil, nil); err == nil || !strings.Contains(err.Error(), "answer id 9, want 1") {
		t.Errorf("wrong id: %v", err)
	}
	if err := c.Call(context.Background(), opAdd, nil, nil); err == nil || !strings.Contains(err.Error(), "malformed answer") {
		t.Errorf("malformed answer: %v", err)
	}
}

// Handle refuses an operation of another role and a second handler;
// Check finds missing ones.
func TestHandleAndCheck(t *testing.T) {
	s := testServer()
	if err := s.Check(); err != nil {
		t.Errorf("complete server: %v", err)
	}
	if got := s.Ops(); !slices.Equal(got, Table[testRole]) {
		t.Errorf("Ops = %v", got)
	}
	for _, op := range []Op{Quit, opAdd} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%s) did not panic", op)
				}
			}()
			Handle(s, op, func(context.Context, struct{}) (struct{}, error) { return struct{}{}, nil })
		}()
	}
	part := NewServer(testRole)
	Handle(part, opAdd, func(context.Context, struct{}) (struct{}, error) { return struct{}{}, nil })
	if err := part.Check(); err == nil || !strings.Contains(err.Error(), "fail len walk bye") {
		t.Errorf("incomplete server: %v", err)
	}
}

// Every role's operations are distinct, and every operation belongs to a
// role.
func TestTable(t *testing.T) {
	seen := map[Op]bool{}
	for role, ops := range Table {
		if role == testRole {
			continue
		}
		if len(ops) == 0 {
			t.Errorf("%s has no operations", role)
		}
		for i, op := range ops {
			if slices.Contains(ops[:i], op) {
				t.Errorf("%s lists %s twice", role, op)
			}
			seen[op] = true
		}
	}
	for _, op := range []Op{Ping, CPU, Stats, Quit, Run, ClientVersion, Listen, Transfer, Mark} {
		if !seen[op] {
			t.Errorf("%s belongs to no role", op)
		}
	}
	if len(seen) != 9 {
		t.Errorf("%d operations in the table, want 9", len(seen))
	}
}

// A call that gives up leaves the line being read to the next call: the
// late answer reaches it (and is refused for its id), and no two
// goroutines read at once.
func TestLateAnswer(t *testing.T) {
	reqR, reqW := io.Pipe()
	go io.Copy(io.Discard, reqR)
	respR, respW := io.Pipe()
	c := NewClient(testRole, reqW, respR)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Call(ctx, opAdd, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	go io.WriteString(respW, `{"id":1,"ok":true}`+"\n"+`{"id":2,"ok":true,"body":7}`+"\n")
	if err := c.Call(context.Background(), opAdd, nil, nil); err == nil || !strings.Contains(err.Error(), "answer id 1, want 2") {
		t.Fatalf("the late answer: %v", err)
	}
	var n int
	if err := c.Call(context.Background(), opAdd, nil, &n); err == nil || !strings.Contains(err.Error(), "answer id 2, want 3") {
		t.Fatalf("the next answer: %v %d", err, n)
	}
	respW.Close()
}
