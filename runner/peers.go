package runner

import (
	"context"
	"fmt"
	"slices"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// checkPeers makes sure, before any testbed is built, that the third-party
// programs the plan's cells need are installed here: the aioquic and Caddy
// servers and the aioquic client. A run that would otherwise stop at the
// first such cell, hours in, stops at once and says what to install. It
// records the aioquic client's version with the run (the servers' are
// recorded when they start, from their hello).
func (r *run) checkPeers(ctx context.Context) error {
	uses := func(f func(c *model.Cell) bool) bool {
		return slices.ContainsFunc(r.cells, func(c model.Cell) bool { return f(&c) })
	}
	aioServer := uses(func(c *model.Cell) bool { return c.Server == model.ServerAioquic })
	aioClient := uses(func(c *model.Cell) bool { return c.Client == model.ClientAioquic })
	if aioServer || aioClient {
		py, err := peers.FindAioquic()
		if err == nil {
			_, _, err = peers.AioquicCheck(ctx, py)
		}
		if err != nil {
			return fmt.Errorf("the plan runs aioquic (as a server or a client), which is not usable here: %w (quicbench doctor checks it)", err)
		}
		if aioClient {
			if err := r.db.SetRunPeer(context.WithoutCancel(ctx), r.runRec.ID, "aioquic client", "aioquic "+peers.AioquicVersion); err != nil {
				return err
			}
		}
	}
	if uses(func(c *model.Cell) bool { return c.Server == model.ServerCaddy }) {
		if _, _, err := peers.FindCaddy(ctx); err != nil {
			return fmt.Errorf("the plan's cells are served by Caddy, which is not usable here: %w (quicbench doctor checks it)", err)
		}
	}
	return nil
}
