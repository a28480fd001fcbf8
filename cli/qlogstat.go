package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/internal/qlogstat"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/store"
)

func init() { Register("qlogstat", newQlogstatCmd) }

func newQlogstatCmd(env *Env) *cobra.Command {
	var dbPath string
	var all, asJSON bool
	cmd := &cobra.Command{
		Use:    "qlogstat [--db RUN.db] PATH...",
		Short:  "Per-connection and per-load figures from qlog files and NetLogs (investigations)",
		Hidden: true,
		Long: `qlogstat reads QUIC event logs and prints a few figures per connection: packets
sent and received, ACKs, packets declared lost (and the largest burst of them within 1 ms),
probe timeouts, the congestion window's range, key updates, received packets the stack
discarded (and why), flow-control frames and the peer's windows, and when requests and
responses crossed the connection.

It reads quic-go's qlog (quicbench serve --qlog, quicbench run --qlog), neqo's and the
Python stack's qlog, and NetLog JSON: the browsers write theirs when quicbench run's
environment asks (docs/peers.md, "Investigating browser samples"). PATH is a file or a
directory (read recursively: *.sqlog,
*.qlog, *.json). By default the figures stop at the last response byte of the page load:
a browser killed after its load leaves the server probing a dead peer until its idle
timeout, which is no part of the sample (--all keeps whole connections).

With --db, every connection is matched to the sample of that run whose time span holds
the connection's start, and a table per cell and log source gives each figure's median
and quartiles over the cell's loads (docs/peers.md, "Investigating browser samples").`,
		Example: `  quicbench qlogstat /tmp/qlog
  quicbench qlogstat --db run.db /tmp/server-qlog /tmp/neqo-qlog /tmp/netlog`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conns, err := readLogs(args, qlogstat.ReadOptions{LoadOnly: !all})
			if err != nil {
				return err
			}
			if dbPath == "" {
				if asJSON {
					return writeJSONLines(env.Stdout, conns)
				}
				printConns(env.Stdout, conns)
				return nil
			}
			samples, err := runSamples(cmd.Context(), dbPath)
			if err != nil {
				return err
			}
			loads, left := qlogstat.Attach(conns, samples)
			if asJSON {
				return writeLoadsJSON(env.Stdout, loads)
			}
			printLoads(env.Stdout, loads)
			if len(left) > 0 {
				fmt.Fprintf(env.Stdout, "\n%d connection(s) started outside every sample of the run\n", len(left))
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&dbPath, "db", "", "results database of the run the logs were taken in: per-cell summaries")
	fl.BoolVar(&all, "all", false, "whole connections, not only up to the page load's last response byte")
	fl.BoolVar(&asJSON, "json", false, "one JSON object per connection (with --db: per load, with its figures)")
	return cmd
}

// readLogs reads every log file under paths.
func readLogs(paths []string, opt qlogstat.ReadOptions) ([]*qlogstat.Conn, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, Usage(err, "give qlog files, NetLog files or directories holding them")
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			switch {
			case d.IsDir():
			case strings.HasSuffix(path, ".sqlog"), strings.HasSuffix(path, ".qlog"):
				files = append(files, path)
			case strings.HasSuffix(path, ".json") && isNetLog(path):
				// other JSON (a browser profile's files) is not a log
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var conns []*qlogstat.Conn
	for _, f := range files {
		cs, err := readLog(f, opt)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, c := range cs {
			c.File = f
		}
		conns = append(conns, cs...)
	}
	return conns, nil
}

// readLog reads one file: a NetLog when it is JSON with "constants", else
// a qlog.
func readLog(name string, opt qlogstat.ReadOptions) ([]*qlogstat.Conn, error) {
	if isNetLog(name) {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return qlogstat.ReadNetLog(f, opt)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return qlogstat.Read(f, opt)
}

// isNetLog tells a Chromium NetLog by its start: a JSON object whose first
// key is "constants".
func isNetLog(name string) bool {
	f, err := os.Open(name)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 64)
	n, _ := io.ReadFull(f, head)
	return strings.HasPrefix(strings.TrimLeft(string(head[:n]), " \t\r\n"), `{"constants"`)
}

// runSamples returns the samples of the latest run in the database.
func runSamples(ctx context.Context, path string) ([]qlogstat.Sample, error) {
	db, err := store.OpenReadOnly(path)
	if err != nil {
		return nil, Usage(err, "--db takes the results database of the run the logs come from")
	}
	defer db.Close()
	run, err := db.LatestRun(ctx)
	if err != nil {
		return nil, err
	}
	ds, err := db.LoadDataset(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	cells := map[int64]*model.Cell{}
	for i := range ds.Cells {
		cells[ds.Cells[i].ID] = &ds.Cells[i]
	}
	var out []qlogstat.Sample
	for _, s := range ds.Samples {
		c := cells[s.CellID]
		if c == nil || s.Started.IsZero() {
			continue
		}
		out = append(out, qlogstat.Sample{Key: c.Key, Iteration: s.Iteration, Value: s.Value,
			Start: s.Started, End: s.Started.Add(s.Wall + s.Overhead)})
	}
	if len(out) == 0 {
		return nil, errors.New("the run has no samples with start times")
	}
	return out, nil
}

func writeJSONLines(w io.Writer, v []*qlogstat.Conn) error {
	enc := json.NewEncoder(w)
	for _, c := range v {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	return nil
}

func writeLoadsJSON(w io.Writer, loads []*qlogstat.Load) error {
	enc := json.NewEncoder(w)
	for _, l := range loads {
		if err := enc.Encode(struct {
			Key       string           `json:"key"`
			Iteration int              `json:"iteration"`
			Value     float64          `json:"value"`
			Source    string           `json:"source"`
			Figures   qlogstat.Figures `json:"figures"`
			Conns     []*qlogstat.Conn `json:"conns"`
		}{l.Sample.Key, l.Sample.Iteration, l.Sample.Value, l.Source, l.Figures(), l.Conns}); err != nil {
			return err
		}
	}
	return nil
}

// printConns prints one line per connection.
func printConns(w io.Writer, conns []*qlogstat.Conn) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE\tSOURCE\tSTART\tREQS\tEND_MS\tSENT\tRECV\tACKS_RECV\tLOST\tBURST\tPTOS\tCWND_MIN..MAX\tKEYUPD\tDROPPED\tBLOCKED")
	for _, c := range conns {
		_, _, end, _, _ := c.Load()
		drops := 0
		for _, n := range c.Dropped {
			drops += n
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d..%d\t%d\t%d\t%d\n",
			filepath.Base(c.File), qlogstat.Source(c), c.Start.Format("15:04:05.000"), len(c.Requests()), end,
			c.PacketsSent, c.PacketsReceived, c.AcksReceived, c.Lost, c.LossBurst, c.PTOs, c.CwndMin, c.CwndMax,
			len(c.KeyUpdates), drops, c.DataBlocked.Sent+c.DataBlocked.Received+c.StreamDataBlocked.Sent+c.StreamDataBlocked.Received)
	}
	tw.Flush()
}

// printLoads prints, per cell and log source, each figure's median and
// quartiles over the cell's loads (warm-up samples left out).
func printLoads(w io.Writer, loads []*qlogstat.Load) {
	type key struct{ cell, source string }
	groups := map[key][]*qlogstat.Load{}
	var order []key
	for _, l := range loads {
		if l.Sample.Iteration < 0 {
			continue
		}
		k := key{l.Sample.Key, l.Source}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], l)
	}
	slices.SortStableFunc(order, func(a, b key) int {
		if a.cell != b.cell {
			return strings.Compare(a.cell, b.cell)
		}
		return strings.Compare(a.source, b.source)
	})
	// the client's discards after the server's key update, per cell
	lags := map[string][]float64{}
	bySample := map[qlogstat.Sample][]*qlogstat.Load{}
	for _, l := range loads {
		bySample[l.Sample] = append(bySample[l.Sample], l)
	}
	for smp, ls := range bySample {
		if smp.Iteration < 0 {
			continue
		}
		for _, srv := range ls {
			for _, cl := range ls {
				if srv.Conns[0].Vantage == "server" && cl.Conns[0].Vantage == "client" {
					if lag, ok := qlogstat.DiscardLag(srv, cl); ok {
						lags[smp.Key] = append(lags[smp.Key], lag)
					}
				}
			}
		}
	}
	for i, k := range order {
		g := groups[k]
		sum := qlogstat.Summarize(g)
		fmt.Fprintf(w, "\n%s\n  %s: %d loads; median [p25, p75] per load (nonzero in how many loads)\n", k.cell, k.source, len(g))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, n := range qlogstat.FigureNames {
			s := sum[n.Name]
			if s.Max == 0 && s.Min == 0 {
				continue
			}
			fmt.Fprintf(tw, "  %s\t%s\t(%d/%d)\t%s\n", n.Name, s, s.Nonzero, s.N, n.Meaning)
		}
		tw.Flush()
		if last := i == len(order)-1 || order[i+1].cell != k.cell; last && len(lags[k.cell]) > 0 {
			s := qlogstat.SummaryOf(lags[k.cell])
			fmt.Fprintf(w, "  the client's first discarded 1-RTT packet came %s ms after the server's key update (%d loads with both)\n", s, s.N)
		}
	}
}
