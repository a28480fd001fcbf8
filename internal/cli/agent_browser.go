package cli

import "github.com/quicbench/quicbench/workload"

// browserLoader returns the Chromium page loader for the agent.
func browserLoader() workload.BrowserLoader { return nil }
