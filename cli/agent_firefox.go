package cli

import (
	"context"
	"fmt"

	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/workload"
)

// firefoxLoader returns the agent's Firefox page loader: as Chromium's
// (browserLoader: a fresh context per sample of the agent's browser, the
// HTTP cache disabled, connection cold or warm), in a fresh user context of
// the agent's headless Firefox, which trusts the server's CA
// (Target.CAPEM) in its profile and, for h3, reaches the origin over
// HTTP/3 from its first request. One Firefox serves every protocol: the
// sample's protocol preferences are set in it before its context is made.
func (a *agentBrowsers) firefoxLoader() workload.BrowserLoader { return pageLoader(a.inFirefox) }

// firefoxVersion starts the Firefox the agent's firefox samples use, once,
// and returns its product ("Firefox/153.7.0"): the runner records it with
// the run, and a resumed run refuses another browser.
func firefoxVersion(ctx context.Context) (string, error) {
	s, err := firefox.NewSession(ctx, firefox.Options{Protocol: model.ProtoH2})
	if err != nil {
		return "", err
	}
	v := s.Version()
	if err := s.Close(); err != nil {
		return "", fmt.Errorf("closing Firefox after reading its version: %w", err)
	}
	return v, nil
}
