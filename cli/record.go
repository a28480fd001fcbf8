package cli

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/browser"
	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/workload"
)

func init() { Register("record", newRecordCmd) }

// recordClients are the clients that record pages with their bodies (a
// workload.ClientImpl with Record), in the registry's order.
func recordClients(env *Env) []string {
	impls := workload.Clients(workload.ClientEnv{Getenv: env.Getenv})
	var out []string
	for _, name := range peers.Clients() {
		if impl, ok := impls[name]; ok && impl.Record != nil {
			out = append(out, name)
		}
	}
	return out
}

func newRecordCmd(env *Env) *cobra.Command {
	var (
		out, spki, proto, client string
		timeout, quiet           time.Duration
		args                     []string
	)
	clients := recordClients(env)
	def := ""
	if len(clients) > 0 {
		def = clients[0]
	}
	cmd := &cobra.Command{
		Use:   "record URL -o page.har",
		Short: "Record a page load in a headless browser as a HAR file, every response body included",
		Long: `Loads URL once in a headless browser (--client, a browser client that records bodies:
` + strings.Join(clients, ", ") + `; a fresh profile, its cache disabled), waits for the load
event and then for the network to be quiet (--quiet), and writes the load as a HAR 1.2 file
with every response body (from the browser's network events and response bodies), ready for
the site test (site: page.har) and quicbench replay. Requests that failed are kept with
status 0; a replay skips them. The page is loaded over HTTP/2 (or --proto h1): what a
replay serves does not depend on it.

Record with internet access, replay anywhere: the HAR holds everything a replay needs.`,
		Example: `  quicbench record https://example.com/ -o example.har
  quicbench replay example.har --link "delay 25ms 10ms loss 2%" --proto h3`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, a []string) error {
			u, err := url.Parse(a[0])
			if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
				return Usage(fmt.Errorf("%q is not an http(s) URL", a[0]), "give the page's full URL, e.g. https://example.com/")
			}
			if out == "" {
				return Usage(fmt.Errorf("no output file"), "give one with -o page.har")
			}
			if proto != model.ProtoH1 && proto != model.ProtoH2 {
				return Usage(fmt.Errorf("--proto %q", proto), "h2 (default) or h1")
			}
			impl, ok := workload.Clients(workload.ClientEnv{Getenv: env.Getenv})[client]
			if !ok || impl.Record == nil {
				return Usage(fmt.Errorf("--client %q does not record pages", client), "clients that do: "+strings.Join(clients, ", "))
			}
			if u.Scheme == "http" {
				proto = model.ProtoH1C
			}
			h, err := impl.Record(cmd.Context(), workload.RecordSpec{URL: u.String(), Proto: proto, SPKI: spki, Timeout: timeout, Quiet: quiet, Args: args})
			if errors.Is(err, peers.ErrNotInstalled) {
				return &ExitError{Code: ExitEnv, Err: err}
			}
			if err != nil {
				return err
			}
			if err := har.WriteFile(out, h); err != nil {
				return err
			}
			s := h.Summarize()
			fmt.Fprintf(env.Stdout, "%s: %d entries (%d to replay, %d skipped) from %d origins, %d bytes of bodies\n",
				out, s.Entries, s.Served, s.Skipped, s.Origins, s.Bytes)
			if s.Missing > 0 {
				fmt.Fprintf(env.Stdout, "  %d entries without their body (%d bytes): replay them with missing_bodies: fill\n", s.Missing, s.MissingBytes)
			}
			if st, err := os.Stat(out); err == nil {
				fmt.Fprintf(env.Stdout, "  %d bytes written\n", st.Size())
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "the HAR file to write")
	f.StringVar(&client, "client", def, "the browser client that records: "+strings.Join(clients, ", "))
	f.DurationVar(&timeout, "timeout", time.Minute, "the longest the load and the quiet after it may take")
	f.DurationVar(&quiet, "quiet", browser.DefaultRecordQuiet, "how long the network must stay idle after the load event")
	f.StringVar(&proto, "proto", model.ProtoH2, "protocol the browser loads the page with: h2 or h1")
	f.StringVar(&spki, "spki", "", "accept a certificate with this SPKI hash (base64 SHA-256; for a test server)")
	f.StringArrayVar(&args, "browser-arg", nil, "an extra browser switch, --name=value (repeatable)")
	return cmd
}
