package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/quicbench/quicbench/internal/testsupport"
	"github.com/quicbench/quicbench/netns"
)

// cliExecEnv makes the test binary act as quicbench ("main"), or as the
// private-TUN helper of the rootless tests ("privtun").
const cliExecEnv = "QUICBENCH_CLI_TEST_EXEC"

func TestMain(m *testing.M) {
	switch os.Getenv(cliExecEnv) {
	case "main":
		os.Exit(Main(&Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Args: os.Args[1:], Getenv: os.Getenv, Exe: os.Args[0]}))
	case "privtun":
		os.Exit(privateTUNNobody())
	}
	os.Exit(m.Run())
}

// rootlessArgs is what TestEmulateRootless runs as user nobody: a command
// behind the link that shows the client namespace's device and its user,
// and exits 7 to show that the exit status comes through.
var rootlessArgs = []string{"emulate", "--link", "delay 5ms", "--", "sh", "-c", "cat /proc/net/dev; echo uid=$(id -u); exit 7"}

// TestEmulateRootless runs `quicbench emulate` as an ordinary user (nobody):
// it must re-execute itself in a user and network namespace, build its
// testbed there and run the command behind the link.
func TestEmulateRootless(t *testing.T) {
	requireRootCLI(t)
	dir := testsupport.NobodyDir(t, "qbclirootless")
	out, err := rootlessAsNobody(t, dir, rootlessArgs...)
	checkRootlessEmulate(t, out, err)
}

// rootlessAsNobody runs the test binary as quicbench with args as user
// nobody, in dir (a copy of the binary is put there), and returns the
// combined output. Where the host's /dev/net/tun keeps ordinary users out,
// it does so in a private mount namespace with a 0666 TUN node (the host's
// stays as it is). Where the machine does not allow unprivileged user
// namespaces, the test ends through testsupport.Unavailable; where it
// does, whatever goes wrong is the caller's to fail on.
func rootlessAsNobody(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	switch err := netns.UserNamespaceSupport(); {
	case err == nil:
		return testsupport.RunAsNobody(dir, []string{cliExecEnv + "=main"}, args...)
	case strings.Contains(err.Error(), testsupport.TUNPath):
		tunDir := filepath.Join(dir, ".tun")
		if err := os.MkdirAll(tunDir, 0o755); err != nil {
			t.Fatal(err)
		}
		enc, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), cliExecEnv+"=privtun", cliExecEnv+"_DIR="+dir, cliExecEnv+"_ARGS="+string(enc))
		cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == privTUNSkip {
			testsupport.Unavailable(t, "unprivileged user namespaces unavailable, even with a private 0666 TUN node: %s", b)
		}
		return string(b), err
	default:
		testsupport.Unavailable(t, "unprivileged user namespaces unavailable: %v", err)
		return "", err
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
// mode is unavailable for another reason than the TUN node: none that
// quicbench uses (its ExitEnv, 3, must fail the test, not skip it).
const privTUNSkip = 97

// privateTUNNobody runs in a private mount namespace as root: it binds a
// 0666 TUN node over /dev/net/tun (from a tmpfs on DIR/.tun) and runs the
// test binary as quicbench with the JSON-encoded ARGS as nobody in DIR,
// printing its output and exiting with its status.
func privateTUNNobody() int {
	dir := os.Getenv(cliExecEnv + "_DIR")
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(cliExecEnv+"_ARGS")), &args); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := testsupport.BindPrivateTUN(filepath.Join(dir, ".tun")); err != nil {
		fmt.Println(err)
		return 1
	}
	if err := netns.UserNamespaceSupport(); err != nil {
		fmt.Println(err)
		return privTUNSkip
	}
	out, err := testsupport.RunAsNobody(dir, []string{cliExecEnv + "=main"}, args...)
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
