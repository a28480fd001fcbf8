package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
)

// cliExecEnv makes the test binary act as quicbench ("main"), or as the
// private-TUN helper of TestEmulateRootless ("privtun").
const cliExecEnv = "QUICBENCH_CLI_TEST_EXEC"

func TestMain(m *testing.M) {
	switch os.Getenv(cliExecEnv) {
	case "main":
		os.Exit(Main(&Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:], Getenv: os.Getenv, Exe: os.Args[0]}))
	case "privtun":
		os.Exit(privateTUNEmulate())
	}
	os.Exit(m.Run())
}

// rootlessArgs is what TestEmulateRootless runs as user nobody: a command
// behind the link that shows the client namespace's device and its user,
// and exits 7 to show that the exit status comes through.
var rootlessArgs = []string{"emulate", "--link", "delay 5ms", "--", "sh", "-c", "cat /proc/net/dev; echo uid=$(id -u); exit 7"}

// TestEmulateRootless runs `quicbench emulate` as an ordinary user (nobody):
// it must re-execute itself in a user and network namespace, build its
// testbed there and run the command behind the link. Where the host's
// /dev/net/tun keeps ordinary users out, the test gives itself a 0666 node
// in a private mount namespace (the host's stays as it is).
func TestEmulateRootless(t *testing.T) {
	requireRootCLI(t)
	dir := testsupport.NobodyDir(t, "qbclirootless")
	var out string
	switch err := netns.UserNamespaceSupport(); {
	case err == nil:
		out, err = emulateAsNobody(dir)
		checkRootlessEmulate(t, out, err)
	case strings.Contains(err.Error(), testsupport.TUNPath):
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), cliExecEnv+"=privtun", cliExecEnv+"_DIR="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == privTUNSkip {
			t.Skipf("with a private 0666 TUN node: %s", b)
		}
		checkRootlessEmulate(t, string(b), err)
	default:
		t.Skipf("unprivileged user namespaces unavailable: %v", err)
	}
}

func checkRootlessEmulate(t *testing.T, out string, err error) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("emulate as nobody: %v, want exit status 7 from the command\n%s", err, out)
	}
	if !strings.Contains(out, netns.DeviceName) || !strings.Contains(out, "uid=0") || !strings.Contains(out, "server address 10.") {
		t.Fatalf("emulate as nobody did not run the command behind the link:\n%s", out)
	}
}

// privTUNSkip is the exit status of the private-TUN helper when rootless
// mode is unavailable for another reason than the TUN node.
const privTUNSkip = 3

// privateTUNEmulate runs in a private mount namespace as root: it binds a
// 0666 TUN node over /dev/net/tun and runs emulate as nobody.
func privateTUNEmulate() int {
	dir := os.Getenv(cliExecEnv + "_DIR")
	if err := testsupport.BindPrivateTUN(dir); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := netns.UserNamespaceSupport(); err != nil {
		fmt.Println(err)
		return privTUNSkip
	}
	out, err := emulateAsNobody(dir)
	fmt.Print(out)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		fmt.Println(err)
		return 1
	}
	return 0
}

// emulateAsNobody runs the test binary as quicbench with rootlessArgs as
// user nobody, from a copy in dir; it returns the combined output.
func emulateAsNobody(dir string) (string, error) {
	return testsupport.RunAsNobody(dir, []string{cliExecEnv + "=main"}, rootlessArgs...)
}
