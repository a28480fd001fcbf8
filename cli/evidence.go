package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/store"
)

func init() { Register("evidence", newEvidenceCommand) }

func newEvidenceCommand(env *Env) *cobra.Command {
	var (
		sampleID, runID int64
		all             bool
		outDir          string
	)
	cmd := &cobra.Command{
		Use:   "evidence RESULTS.db [--sample ID | --all] [-o DIR]",
		Short: "Write out the evidence kept with samples: packet captures, key logs, qlogs",
		Long: `A run with capture: pcap (quicbench run --capture) keeps, with every sample, a pcapng
file of the emulator's packets: both directions, each packet stamped when it left the
emulator, with the emulator's verdict in its comment (delivered, dropped by loss, queue, mtu
or blackout; reordered, duplicated, corrupted) and when it entered, and the TLS secrets of the
sample's connections embedded, so that Wireshark and tshark decrypt QUIC and TLS with no other
file. With --keylog a sample keeps its key log, with --qlog its connections' qlogs.

Without --sample or --all, evidence lists the samples that have evidence. --sample ID writes
that sample's files into DIR (default RESULTS-evidence/sample-ID); --all writes every
sample's into DIR/sample-ID/ (default RESULTS-evidence). Existing files are replaced.
docs/data.md ("Evidence") says what each file holds.`,
		Example: `  quicbench evidence results.db
  quicbench evidence results.db --sample 42 -o s42 && wireshark s42/capture.pcapng
  tshark -r s42/capture.pcapng -Y 'frame.comment contains "dropped by loss"'
  quicbench evidence results.db --all --run 1 -o evidence/`,
		Args: exactArgs(1, "evidence takes one results database", "quicbench evidence RESULTS.db [--sample ID | --all] [-o DIR]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if all && cmd.Flags().Changed("sample") {
				return Usage(errors.New("--sample and --all exclude each other"), "give one sample, or all")
			}
			if cmd.Flags().Changed("sample") && sampleID <= 0 {
				return Usage(fmt.Errorf("--sample %d: sample IDs are positive", sampleID), "quicbench evidence RESULTS.db lists the samples with evidence")
			}
			if runID < 0 {
				return Usage(fmt.Errorf("--run %d: run IDs are positive", runID), "")
			}
			path := args[0]
			db, err := store.OpenReadOnly(path)
			if err != nil {
				return dbOpenError(err, "give the results database written by quicbench run")
			}
			defer db.Close()
			ctx := cmd.Context()
			base := strings.TrimSuffix(path, filepath.Ext(path)) + "-evidence"
			switch {
			case sampleID > 0:
				ref, err := db.Sample(ctx, sampleID)
				if errors.Is(err, store.ErrNotFound) {
					return Usage(err, "quicbench evidence RESULTS.db lists the samples with evidence")
				} else if err != nil {
					return err
				}
				evs, err := db.Evidence(ctx, sampleID)
				if err != nil {
					return err
				}
				if len(evs) == 0 {
					return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sample %d (%s iteration %d) has no evidence", sampleID, ref.CellKey, ref.Iteration),
						Hint: "runs keep it with capture: pcap (quicbench run --capture), --keylog or --qlog"}
				}
				if outDir == "" {
					outDir = filepath.Join(base, fmt.Sprintf("sample-%d", sampleID))
				}
				return writeEvidence(env, db, cmd, outDir, evs, false)
			case all:
				evs, err := runsEvidence(cmd, db, runID)
				if err != nil {
					return err
				}
				if outDir == "" {
					outDir = base
				}
				return writeEvidence(env, db, cmd, outDir, evs, true)
			default:
				evs, err := runsEvidence(cmd, db, runID)
				if err != nil {
					return err
				}
				return listEvidence(env, db, cmd, evs)
			}
		},
	}
	outputFlag(cmd, &outDir, "directory to write the files into")
	f := cmd.Flags()
	f.Int64Var(&sampleID, "sample", 0, "the sample whose evidence to write (samples.sample_id of quicbench export)")
	f.BoolVar(&all, "all", false, "write every sample's evidence, each into DIR/sample-ID/")
	f.Int64Var(&runID, "run", 0, "only this run's samples (default: every run)")
	return cmd
}

// runsEvidence lists the evidence of run runID, or of every run.
func runsEvidence(cmd *cobra.Command, db *store.DB, runID int64) ([]store.EvidenceInfo, error) {
	runs, err := db.Runs(cmd.Context())
	if err != nil {
		return nil, err
	}
	var out []store.EvidenceInfo
	found := false
	for _, r := range runs {
		if runID != 0 && r.ID != runID {
			continue
		}
		found = true
		evs, err := db.RunEvidence(cmd.Context(), r.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	if runID != 0 && !found {
		return nil, Usage(fmt.Errorf("--run %d: no such run", runID), "omit --run to see every run")
	}
	return out, nil
}

// listEvidence prints one line per sample with evidence.
func listEvidence(env *Env, db *store.DB, cmd *cobra.Command, evs []store.EvidenceInfo) error {
	if len(evs) == 0 {
		fmt.Fprintln(env.Stderr, "no sample has evidence: runs keep it with capture: pcap (quicbench run --capture), --keylog or --qlog")
		return nil
	}
	for i := 0; i < len(evs); {
		j := i
		var files []string
		for ; j < len(evs) && evs[j].SampleID == evs[i].SampleID; j++ {
			files = append(files, fmt.Sprintf("%s (%s)", evs[j].Name, humanBytes(evs[j].Bytes)))
		}
		ref, err := db.Sample(cmd.Context(), evs[i].SampleID)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "sample %d\trun %d\t%s\titeration %d\t%s\n", ref.ID, ref.RunID, ref.CellKey, ref.Iteration, strings.Join(files, ", "))
		i = j
	}
	return nil
}

// writeEvidence writes each file into dir (into dir/sample-ID/ when
// perSample), each under a temporary name renamed when complete, and
// prints the paths.
func writeEvidence(env *Env, db *store.DB, cmd *cobra.Command, dir string, evs []store.EvidenceInfo, perSample bool) error {
	for _, e := range evs {
		path := filepath.Join(dir, e.Name)
		if perSample {
			path = filepath.Join(dir, filepath.FromSlash(store.EvidencePath(e.SampleID, e.Name)))
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return &ExitError{Code: ExitFailure, Err: err}
		}
		err := writeAtomic(path, func(w io.Writer) error {
			_, err := db.CopyEvidence(cmd.Context(), e.SampleID, e.Name, w)
			return err
		})
		if err != nil {
			return &ExitError{Code: ExitFailure, Err: fmt.Errorf("sample %d %s: %w", e.SampleID, e.Name, err)}
		}
		fmt.Fprintln(env.Stdout, path)
	}
	return nil
}

// writeAtomic writes path through a temporary file in its directory.
func writeAtomic(path string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(0o644)
	if err == nil {
		err = write(f)
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// humanBytes writes n bytes with a decimal unit and three significant
// digits, e.g. 1.21 MB.
func humanBytes(n int64) string {
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n), ""
	for _, u := range []string{"kB", "MB", "GB", "TB"} {
		v, unit = v/1000, u
		if v < 1000 {
			break
		}
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + " " + unit
}
