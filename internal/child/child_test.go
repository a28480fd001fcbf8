package child

import (
	"bufio"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A process that writes and exits at once: its last line is still read
// after it has been reaped (StdoutPipe would have been closed by Wait), and
// Describe reports its exit status with the end of its stderr.
func TestLastLinesAfterExit(t *testing.T) {
	p, err := Start(exec.Command("sh", "-c", `echo one; echo two; echo oops >&2; exit 3`))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	var lines []string
	sc := bufio.NewScanner(p.Stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if strings.Join(lines, ",") != "one,two" {
		t.Errorf("read %q after exit, want one,two", lines)
	}
	if d := p.Describe(); d != "exit status 3: oops" {
		t.Errorf("Describe = %q", d)
	}
	p.Stop(time.Second) // idempotent after exit
	p.Stop(time.Second)
}

// Stop closes stdin (a well-behaved child exits) and kills one that does
// not within the grace period.
func TestStop(t *testing.T) {
	polite, err := Start(exec.Command("cat"))
	if err != nil {
		t.Fatal(err)
	}
	if d := polite.Describe(); d != "running" {
		t.Errorf("Describe of a running process = %q", d)
	}
	polite.Stop(time.Minute)
	if d := polite.Describe(); d != "exit status 0" {
		t.Errorf("cat after its stdin closed: %q, want exit status 0", d)
	}
	stubborn, err := Start(exec.Command("sh", "-c", `trap "" TERM; exec sleep 600 </dev/null`))
	if err != nil {
		t.Fatal(err)
	}
	stubborn.Stop(50 * time.Millisecond)
	if d := stubborn.Describe(); d != "signal: killed" {
		t.Errorf("a child ignoring its stdin: %q, want signal: killed", d)
	}
}

func TestStderrTail(t *testing.T) {
	var tl tail
	tl.Write([]byte(strings.Repeat("x", tailMax)))
	tl.Write([]byte("  the end \n"))
	if s := tl.String(); len(s) != tailMax-2 || !strings.HasSuffix(s, "xx  the end") {
		t.Errorf("tail kept %d bytes ending %q", len(s), s[len(s)-12:])
	}
}
