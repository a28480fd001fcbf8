package testsupport

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// ReadPID reads the process id that a test's helper process wrote to path.
// When the file cannot be read, the test fails with notStarted and the
// error ("the child never started: ...").
func ReadPID(t testing.TB, path, notStarted string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", notStarted, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
