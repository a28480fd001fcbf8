package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/store"
)

func init() { Register("export", newExportCommand) }

func newExportCommand(env *Env) *cobra.Command {
	var (
		format string
		tables []string
		runID  int64
		outDir string
	)
	cmd := &cobra.Command{
		Use:   "export RESULTS.db",
		Short: "Export a results database as CSV, JSON lines or Parquet, one file per table",
		Long: `Writes the tables of a results database (runs, cells, samples, transport,
timelines, resources, warnings, evidence) as one file per table, TABLE.FORMAT,
in the output directory, and prints the paths. The evidence table lists the
files kept with samples (captures, key logs, qlogs); quicbench evidence
writes the files themselves. The samples table has one row per
sample with every metric as a column m_NAME and every factor as f_NAME.
docs/data.md describes every column and how to load the files in pandas, R
or DuckDB in one line.`,
		Example: `  quicbench export results.db
  quicbench export results.db --format parquet -o analysis/
  quicbench export results.db --format jsonl --table samples --run 2`,
		Args: exactArgs(1, "export takes one results database", "quicbench export RESULTS.db [--format csv|jsonl|parquet]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !slices.Contains(store.Formats, format) {
				return Usage(fmt.Errorf("unknown format %q", format), "formats: "+strings.Join(store.Formats, ", "))
			}
			var sel []string
			for _, t := range tables {
				for _, name := range strings.Split(t, ",") {
					name = strings.TrimSpace(name)
					if !slices.Contains(store.Tables, name) {
						return Usage(fmt.Errorf("unknown table %q", name), "tables: "+strings.Join(store.Tables, ", "))
					}
					if !slices.Contains(sel, name) {
						sel = append(sel, name)
					}
				}
			}
			if runID < 0 {
				return Usage(fmt.Errorf("--run %d: run IDs are positive", runID), "omit --run to export every run")
			}
			path := args[0]
			if outDir == "" {
				outDir = strings.TrimSuffix(path, filepath.Ext(path)) + "-export"
			}
			db, err := store.OpenReadOnly(path)
			if err != nil {
				return dbOpenError(err, "give the results database written by quicbench run")
			}
			defer db.Close()
			if run, err := db.LatestRun(cmd.Context()); err == nil && (runID == 0 || runID == run.ID) {
				n, _ := db.SampleCount(cmd.Context(), run.ID)
				noteRunState(env, path, run.ID, run.Status, n)
			}
			paths, err := db.Export(cmd.Context(), store.ExportOptions{Format: format, Tables: sel, RunID: runID, Dir: outDir})
			for _, p := range paths {
				fmt.Fprintln(env.Stdout, p)
			}
			if errors.Is(err, store.ErrNotFound) {
				return Usage(err, "the database's runs are listed in its runs table; omit --run to export all")
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", store.FormatCSV, "file format: "+strings.Join(store.Formats, ", "))
	f.StringSliceVar(&tables, "table", nil, "export only these tables (repeatable or comma-separated): "+strings.Join(store.Tables, ", "))
	f.Int64Var(&runID, "run", 0, "export only this run (default: every run in the database)")
	outputFlag(cmd, &outDir, "output directory (default: RESULTS-export next to the database)")
	return cmd
}
