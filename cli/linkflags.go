package cli

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/emu/spec"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
)

// LinkFlags are the link options shared by the commands that build an
// emulated link (testbed up, emulate, calibrate): --link, --up, --down,
// --seed and --cc.
type LinkFlags struct {
	link, up, down string
	Seed           uint64
	CC             string
}

// linkSpecHint points users at the grammar.
const linkSpecHint = `a link spec uses tc-netem's grammar, e.g. "delay 25ms 5ms loss 1% rate 50mbit"; see docs/link-spec.md`

// AddLinkFlags registers the link flags on cmd and returns where they land.
func AddLinkFlags(cmd *cobra.Command) *LinkFlags {
	f := &LinkFlags{}
	fs := cmd.Flags()
	fs.StringVar(&f.link, "link", "", "link spec applied to each direction independently (like netem on both ends)")
	fs.StringVar(&f.up, "up", "", "link spec client->server (default: a perfect link)")
	fs.StringVar(&f.down, "down", "", "link spec server->client (default: a perfect link)")
	fs.Uint64Var(&f.Seed, "seed", 1, "seed of the link's random decisions (same seed, same per-packet decisions)")
	fs.StringVar(&f.CC, "cc", model.DefaultCC, "TCP congestion control in both namespaces: "+strings.Join(model.CongestionControls, ", "))
	return f
}

// Links parses the specs: --link for both directions, or --up and --down.
// Bad input is a usage error (exit 2) naming the flag and the token.
func (f *LinkFlags) Links() (up, down spec.Link, err error) {
	up, down, err = spec.ParseDirections(f.link, f.up, f.down)
	if err != nil {
		var se *spec.Error
		if errors.As(err, &se) {
			return spec.Link{}, spec.Link{}, Usage(fmt.Errorf("--%s: %w", se.Spec, err), linkSpecHint)
		}
		return spec.Link{}, spec.Link{}, Usage(err, "use --link alone, or --up and/or --down")
	}
	if !slices.Contains(model.CongestionControls, f.CC) {
		return spec.Link{}, spec.Link{}, Usage(fmt.Errorf("--cc %q: want one of %s", f.CC, strings.Join(model.CongestionControls, ", ")), "")
	}
	return up, down, nil
}

// testbedError classifies an error from netns.New or SetLink for the exit
// code: bad configuration (a trace file that will not load...) is a usage
// error, missing privileges an environment error.
func testbedError(err error) error {
	switch {
	case errors.Is(err, netns.ErrConfig):
		return Usage(err, linkSpecHint)
	case errors.Is(err, os.ErrPermission):
		return &ExitError{Code: ExitEnv, Err: err, Hint: "network namespaces and TUN devices need root; run quicbench doctor to see what this machine allows"}
	}
	return err
}
