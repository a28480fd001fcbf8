package cli

import (
	"fmt"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/endpoint/replay"
)

// serveReplay adds the replay of spec (serve --replay FILE) to cfg: the
// recorded pages, prepared for serving, on their origins' addresses.
func serveReplay(cfg *endpoint.ServerConfig, spec string) error {
	if spec == "" {
		return nil
	}
	if cfg.Certificate != nil {
		return Usage(fmt.Errorf("--replay cannot be combined with --cert"), "a replay mints a certificate per recorded host name with its own CA")
	}
	s, archives, err := replay.LoadSpec(spec)
	if err != nil {
		return Usage(fmt.Errorf("--replay: %w", err), "the spec quicbench run writes, naming HAR files and origin addresses")
	}
	o, err := replay.NewOrigins(&s.Layout, archives)
	if err != nil {
		return fmt.Errorf("--replay: %w", err)
	}
	cfg.Replay = o
	return nil
}
