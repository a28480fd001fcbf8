package calibrate

import (
	"context"
	"fmt"
	"os"
	"testing"
)

// execEnv makes the test binary act as quicbench's BulkCommand, so that the
// throughput phase's children (started with os.Executable(), the test
// binary) work in tests, as runner's tests do with the whole command line.
const execEnv = "QUICBENCH_CALIBRATE_TEST_EXEC"

func TestMain(m *testing.M) {
	if os.Getenv(execEnv) == "1" {
		if len(os.Args) != 3 || os.Args[1] != BulkCommand {
			fmt.Fprintf(os.Stderr, "calibrate test child: unexpected arguments %q\n", os.Args[1:])
			os.Exit(2)
		}
		if err := BulkMain(context.Background(), os.Args[2], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "quicbench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Setenv(execEnv, "1") // for the children
	os.Exit(m.Run())
}
