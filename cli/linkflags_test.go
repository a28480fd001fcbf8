package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func parseLinkFlags(t *testing.T, args ...string) (*LinkFlags, error) {
	t.Helper()
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	lf := AddLinkFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return lf, nil
}

func TestLinkFlags(t *testing.T) {
	lf, _ := parseLinkFlags(t, "--link", "delay 10ms loss 1%")
	up, down, err := lf.Links()
	if err != nil {
		t.Fatal(err)
	}
	if up.String() != "delay 10ms loss 1%" || down.String() != up.String() {
		t.Fatalf("--link gave up %q down %q", up.String(), down.String())
	}
	if lf.Seed != 1 || lf.CC != "cubic" {
		t.Fatalf("defaults seed %d cc %q", lf.Seed, lf.CC)
	}

	lf, _ = parseLinkFlags(t, "--down", "rate 10mbit", "--seed", "9", "--cc", "bbr")
	up, down, err = lf.Links()
	if err != nil {
		t.Fatal(err)
	}
	if !up.IsZero() || down.RateBps() != 10_000_000 || lf.Seed != 9 || lf.CC != "bbr" {
		t.Fatalf("--down only: up %q down %q seed %d cc %s", up.String(), down.String(), lf.Seed, lf.CC)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--link", "delay -5ms"}, `--link: link spec (link): token 2 "-5ms"`},
		{[]string{"--up", "loss 150%"}, `--up: link spec (up): token 2 "150%"`},
		{[]string{"--down", "rate 0"}, `--down: link spec (down)`},
		{[]string{"--down", "wobble 3"}, `"wobble"`},
		{[]string{"--link", "delay 1ms", "--up", "delay 2ms"}, "not both"},
		{[]string{"--cc", "vegas"}, `--cc "vegas"`},
	} {
		lf, _ := parseLinkFlags(t, c.args...)
		_, _, err := lf.Links()
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage {
			t.Errorf("%q: error %v, want a usage error", c.args, err)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %q does not mention %q", c.args, err, c.want)
		}
	}
}
