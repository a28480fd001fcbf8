package chromium

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/quicbench/quicbench/browser"
)

// netLogEnv is an environment variable of the client agent (the runner's
// environment) for investigating Chromium's samples: a directory into
// which every Chromium the agent starts writes its NetLog
// (netlog-UNIXNANO.json, capture mode Everything), which `quicbench
// qlogstat` reads (docs/peers.md, "Firefox (client)"); a kept browser's
// NetLog holds all its samples, so for one NetLog per sample run the plan
// with browser_restart: always. It is recorded nowhere in the results:
// use it for investigation runs, not for results to publish.
const netLogEnv = "QUICBENCH_CHROMIUM_NETLOG"

// applyNetLog adds the NetLog switches to o when dir (netLogEnv's value)
// is set, making the directory first.
func applyNetLog(o *browser.Options, dir string) error {
	if dir == "" {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(abs, 0o755)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", netLogEnv, err)
	}
	name := filepath.Join(abs, fmt.Sprintf("netlog-%d.json", time.Now().UnixNano()))
	o.ExtraArgs = append(o.ExtraArgs, "--log-net-log="+name, "--net-log-capture-mode=Everything")
	return nil
}
