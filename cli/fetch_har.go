package cli

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/har"
)

// addHARFlags registers fetch's --har and --har-bodies.
func addHARFlags(cmd *cobra.Command) (file *string, bodies *bool) {
	file, bodies = new(string), new(bool)
	cmd.Flags().StringVar(file, "har", "", "a browser client: also write the page loads as a HAR 1.2 file (one page per load; each resource with the protocol it was checked with)")
	cmd.Flags().BoolVar(bodies, "har-bodies", false, "with --har: keep the response bodies too (a browser client that records them)")
	return file, bodies
}

// harCollector gathers the archives of fetch's page loads into one, a
// page per load.
type harCollector struct {
	file string
	h    *har.HAR
}

// newHARCollector returns nil when no --har file was asked for.
func newHARCollector(file *string) *harCollector {
	if file == nil || *file == "" {
		return nil
	}
	return &harCollector{file: *file}
}

// add appends one load's archive (nil is ignored) as the next page.
func (c *harCollector) add(h *har.HAR) {
	if c == nil || h == nil {
		return
	}
	if c.h == nil {
		c.h = &har.HAR{Log: har.Log{Version: "1.2", Creator: h.Log.Creator, Browser: h.Log.Browser, Entries: []har.Entry{}}}
	}
	id := "page_" + strconv.Itoa(len(c.h.Log.Pages)+1)
	for _, p := range h.Log.Pages {
		p.ID = id
		c.h.Log.Pages = append(c.h.Log.Pages, p)
		break
	}
	for _, e := range h.Log.Entries {
		e.Pageref = id
		c.h.Log.Entries = append(c.h.Log.Entries, e)
	}
}

// write writes the archive (when any load was recorded).
func (c *harCollector) write(env *Env) {
	if c == nil {
		return
	}
	if c.h == nil || len(c.h.Log.Entries) == 0 {
		fmt.Fprintf(env.Stderr, "--har %s: nothing recorded, not written\n", c.file)
		return
	}
	if err := har.WriteFile(c.file, c.h); err != nil {
		fmt.Fprintf(env.Stderr, "--har: %v\n", err)
		return
	}
	fmt.Fprintf(env.Stderr, "HAR of %d page loads (%d entries) written to %s\n", len(c.h.Log.Pages), len(c.h.Log.Entries), c.file)
}
