package netns

import (
	"context"
	"errors"
	"os"
	"strings"
)

// Cleanup removes what quicbench testbeds left behind: persistent testbeds
// whose holding process is gone (their bind mounts under /run/netns, their
// state files, and any process still running in their namespaces), and
// qb- entries under /run/netns that no live testbed owns. Live testbeds are
// left alone (stop them with Down). It returns a description of each thing
// removed.
//
// Non-persistent testbeds need no cleanup: their namespaces are held only
// by the quicbench process's file descriptors and the commands started in
// them die with it.
func Cleanup(ctx context.Context) (removed []string, err error) {
	var errs []error
	infos, lerr := List()
	errs = append(errs, lerr)
	owned := map[string]bool{}
	for _, info := range infos {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		if info.Alive() && isQuicbenchTestbed(info.PID) {
			owned[info.ClientNS] = true
			owned[info.ServerNS] = true
			continue
		}
		r, err := removeStale(info.Name, info.ClientNS, info.ServerNS)
		removed = append(removed, r...)
		errs = append(errs, err)
	}
	// Orphaned bind mounts (no state file, or a state file removed above).
	ents, derr := os.ReadDir("/run/netns")
	if derr != nil && !errors.Is(derr, os.ErrNotExist) {
		errs = append(errs, derr)
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, Prefix) || owned[name] {
			continue
		}
		r, err := removeStale("", name)
		removed = append(removed, r...)
		errs = append(errs, err)
	}
	// Left-over temporary state files.
	if ents, err := os.ReadDir(StateDir); err == nil {
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".json.tmp") {
				if os.Remove(StateDir+"/"+e.Name()) == nil {
					removed = append(removed, "state "+StateDir+"/"+e.Name())
				}
			}
		}
	}
	return removed, errors.Join(errs...)
}
