package cli

import (
	"context"
	"fmt"

	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/workload"
)

// firefoxLoader returns the agent's Firefox page loader: as Chromium's
// (browserLoader: a fresh profile per sample, the HTTP cache disabled,
// connection cold or warm), in headless Firefox that trusts the server's
// CA (Target.CAPEM) in its profile and, for h3, reaches the origin over
// HTTP/3 from its first request.
func firefoxLoader() workload.BrowserLoader {
	return sessionLoader(func(ctx context.Context, req workload.Request, url string) (pageSession, error) {
		o := firefox.Options{
			URL:          url,
			Protocol:     req.Protocol,
			CAPEM:        []byte(req.Target.CAPEM),
			Timeout:      req.Timeout,
			DisableCache: true,
		}
		inv := agentInvestigation()
		if err := inv.applyFirefox(&o); err != nil {
			return nil, err
		}
		s, err := firefox.NewSession(ctx, o)
		if err != nil {
			return nil, err
		}
		return inv.wrapFirefox(s), nil
	})
}

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
