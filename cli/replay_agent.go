package cli

import (
	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/firefox"
	"github.com/quicbench/quicbench/workload"
)

// replayChromium sets a Chromium sample of a recorded page up
// (browser.Options.ReplayOptions); other samples are left as they are.
func replayChromium(req workload.Request, o *browser.Options) {
	if req.Replay != nil {
		o.ReplayOptions(req.Replay.Hosts, req.Replay.Origins)
	}
}

// replayFirefox sets a Firefox sample of a recorded page up
// (firefox.Options.ReplayOptions).
func replayFirefox(req workload.Request, o *firefox.Options) {
	if req.Replay != nil {
		o.ReplayOptions(req.Replay.Origins)
	}
}
