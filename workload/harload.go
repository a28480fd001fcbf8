package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/har"
)

// HARSession is a browser session that records a page load as HAR 1.2
// while it loads it (*browser.Session; Firefox's driver session): with
// the response bodies when bodies is set and the browser keeps them.
type HARSession interface {
	LoadHAR(ctx context.Context, url string, bodies bool) (*browser.Result, *har.HAR, error)
}

// harRecording is a page session whose loads are recorded: it keeps the
// HAR of its last load (a warm sample's measured one).
type harRecording struct {
	PageSession
	rec  HARSession
	last *har.HAR
}

func (h *harRecording) Load(ctx context.Context, url string) (*browser.Result, error) {
	res, rec, err := h.rec.LoadHAR(ctx, url, false)
	if rec != nil {
		h.last = rec
	}
	return res, err
}

// recordHAR makes p record its loads when req asks for a HAR file
// (Request.HARFile); done writes the last load's HAR there, and says why
// when there is none.
func recordHAR(req Request, p PageSession) (PageSession, func() error) {
	if req.HARFile == "" {
		return p, func() error { return nil }
	}
	hs, ok := p.(HARSession)
	if !ok {
		return p, func() error { return fmt.Errorf("no HAR: client %s's browser cannot record one", req.Client) }
	}
	h := &harRecording{PageSession: p, rec: hs}
	return h, func() error {
		if h.last == nil {
			return fmt.Errorf("no HAR: the page load recorded none")
		}
		b, err := json.Marshal(h.last)
		if err != nil {
			return fmt.Errorf("no HAR: %w", err)
		}
		if err := os.WriteFile(req.HARFile, b, 0o600); err != nil {
			return fmt.Errorf("no HAR: %w", err)
		}
		return nil
	}
}
