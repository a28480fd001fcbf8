package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quicbench/quicbench/calibrate"
	"github.com/quicbench/quicbench/netns"
)

func init() {
	Register("calibrate", newCalibrateCmd)
	Register(calibrate.BulkCommand, newCalibrateBulkCmd)
}

// runCalibration is calibrate.Run; tests replace it to see whether a
// command line gets as far as building anything.
var runCalibration = calibrate.Run

// runParallelCalibration is calibrate.RunParallel, replaced by tests as
// runCalibration is.
var runParallelCalibration = calibrate.RunParallel

// runAdmittedCalibration is calibrate.RunAdmitted, replaced by tests as
// runCalibration is.
var runAdmittedCalibration = calibrate.RunAdmitted

// defaultParallelLink is calibrate --parallel's link when none is given:
// a delay and a rate, so that every testbed's load is link-bound (as the
// samples of a run are) rather than 100 Mbit/s each.
const defaultParallelLink = "delay 25ms rate 10mbit"

// defaultAdmittedLink is calibrate --parallel --admitted's link when none
// is given: the slowest of size-bandwidth-grid's (1 Mbit/s, 100 ms of
// round trip), the kind of link whose samples many testbeds share.
const defaultAdmittedLink = "delay 50ms rate 1mbit"

func newCalibrateCmd(env *Env) *cobra.Command {
	var (
		packets    int
		duration   time.Duration
		jsonOut    bool
		throughput bool
		quiet      bool
		parallel   string
		admitted   bool
	)
	cmd := &cobra.Command{
		Use:   "calibrate [--link SPEC | --up SPEC --down SPEC] [--seed N] [--packets N] [--duration D] [--throughput | --parallel N[,N...] [--admitted]] [--json]",
		Short: "Measure what the emulated link really does and compare it with its spec; exit 1 when a figure is out of tolerance",
		Long: `calibrate builds a testbed with the given link, sends its own probe traffic between the two
namespaces and measures, per direction: one-way delay p50, p99 and max (idle and under a bulk
UDP load of 100 Mbit/s, or half the link's rate), jitter, loss with its 95% binomial interval,
duplicates, reordering and the delivered rate. Each figure is compared with what the link spec
prescribes for exactly these packets (the emulator's own model replayed in virtual time with
the same seed), within a documented tolerance: delay p50 50 us, p99 150 us, jitter 50 us,
rate 2%, the seeded loss count exactly, and the configured loss probability inside the measured
interval (95% shown; judged at 99.9%, since one seed in twenty misses the 95% interval). The
measurement's own error floor is measured on a plain veth pair in the same run.

With --throughput it also compares the bulk goodput of kernel TCP, TCP+TLS and quic-go through
the emulated link with the same over the veth pair, and measures the emulator's CPU at
100 Mbit/s as the CPU it takes from a competing workload, next to the same load over the veth
pair (shaped by the kernel's tbf where the emulator enforces a rate). The bulk endpoints run as separate quicbench processes inside the namespaces (as
quicbench run's server and agent do), not in the process that hosts the emulator.

With --parallel N it builds N testbeds (each with its own namespaces, TUN devices and
forwarder, in this process, as quicbench run --parallel does) and runs the idle and loaded
probe phases on all of them at once; a list (--parallel 1,4,8,16) measures each N in turn.
It reports the per-packet delay error (measured minus the seeded model's delay of each probe)
p50 and p99 per testbed and direction, pooled over the testbeds, and of the worst testbed,
against the targets (p50 50 us, p99 150 us), next to the veth floor measured in the same run
and the machine's CPU busy share (/proc/stat, every process) during each phase. The default
link of this mode is "` + defaultParallelLink + `" each way.

With --parallel N --admitted the N testbeds carry the load quicbench run --parallel's
admission rule admits instead: testbed 1 runs the idle probe phase (probes both ways,
the veth floor and the machine's timer baseline beside it) while each other testbed
carries one bulk download through its link, QUIC and TLS over TCP in turn, between a
server and a client process in its namespaces, as long as the rule admits it beside the
others (their loads predicted as a run predicts a download's over that link, within half
the machine's CPUs). Per N it reports the probe testbed's per-packet delay error p50 and
p99 (judged against the same targets), the load predicted and measured (the transfers'
CPU time x 1.5), the machine's CPU busy share and timer baseline, and what each testbed
held: memory (the drop of MemAvailable), file descriptors and threads of this process.
Give 1 among the Ns (--parallel 1,64) for the baseline of the same run. The default link
of this mode is "` + defaultAdmittedLink + `" each way.

Exit status: 0 when every judged figure is within tolerance, 1 naming the ones that are not,
2 for bad input, 3 when the machine cannot build namespaces. Methods and tolerances:
package calibrate's documentation (go doc github.com/quicbench/quicbench/calibrate).`,
		Example: `  quicbench calibrate --link "delay 25ms"
  quicbench calibrate --link "delay 20ms loss 2%" --packets 50000 --seed 7
  quicbench calibrate --up "rate 10mbit" --down "rate 100mbit delay 10ms" --json
  quicbench calibrate --link "delay 10ms" --throughput --duration 5s
  quicbench calibrate --parallel 1,4,8,16 --packets 10000
  quicbench calibrate --parallel 1,64 --admitted --packets 5000`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return Usage(fmt.Errorf("unexpected argument %q", args[0]), `calibrate takes only flags; quote a link spec: --link "delay 25ms"`)
			}
			return nil
		},
	}
	lf := AddLinkFlags(cmd)
	fs := cmd.Flags()
	fs.IntVar(&packets, "packets", calibrate.DefaultPackets, "probes per direction in each of the idle and loaded phases")
	fs.DurationVar(&duration, "duration", calibrate.DefaultDuration, "length of the rate measurement per direction and of each throughput transfer")
	fs.BoolVar(&throughput, "throughput", false, "also compare TCP, TLS and QUIC goodput with a plain veth pair, and measure the emulator's CPU")
	fs.BoolVar(&jsonOut, "json", false, "write the report as JSON")
	fs.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on standard error")
	fs.StringVar(&parallel, "parallel", "", "number of testbeds active at once, or a comma-separated list of them to sweep (e.g. 1,4,8,16): delay precision with N testbeds (default link \""+defaultParallelLink+"\")")
	fs.BoolVar(&admitted, "admitted", false, "with --parallel: testbed 1 probes while the others carry bulk downloads as the admission rule admits them (default link \""+defaultAdmittedLink+"\")")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		var counts []int
		if fs.Changed("parallel") {
			var err error
			if counts, err = calibrate.ParseParallel(parallel); err != nil {
				return Usage(fmt.Errorf("--parallel %q: %w", parallel, err), fmt.Sprintf("give a number of testbeds from 1 to %d, or a list such as 1,4,8,16", calibrate.MaxParallel))
			}
			if throughput {
				return Usage(errors.New("--parallel and --throughput cannot be combined"), "")
			}
			if !fs.Changed("link") && !fs.Changed("up") && !fs.Changed("down") {
				link := defaultParallelLink
				if admitted {
					link = defaultAdmittedLink
				}
				if err := fs.Set("link", link); err != nil {
					return err
				}
			}
		} else if admitted {
			return Usage(errors.New("--admitted needs --parallel"), "give the numbers of testbeds, e.g. --parallel 1,64 --admitted")
		}
		up, down, err := lf.Links()
		if err != nil {
			return err
		}
		if admitted && up.Delay+down.Delay < time.Millisecond && up.RateBps() == 0 && down.RateBps() == 0 {
			return Usage(errors.New("--admitted needs a link with a rate or a delay"), "samples over an unlimited link run alone in a parallel run; give a link such as --link \""+defaultAdmittedLink+"\"")
		}
		if packets < calibrate.MinPackets || packets > calibrate.MaxPackets {
			return Usage(fmt.Errorf("--packets %d: want %d to %d", packets, calibrate.MinPackets, calibrate.MaxPackets),
				"at least 20000 probes give loss intervals of about ±0.2 points at 2%")
		}
		if duration < calibrate.MinDuration || duration > calibrate.MaxDuration {
			return Usage(fmt.Errorf("--duration %v: want %v to %v", duration, calibrate.MinDuration, calibrate.MaxDuration), "")
		}
		if !netns.InRootless() && os.Geteuid() != 0 {
			return reexecRootless(cmd, env)
		}
		var progress io.Writer
		if !quiet {
			progress = env.Stderr
		}
		cfg := calibrate.Config{
			Up: up, Down: down, Seed: lf.Seed, CC: lf.CC,
			Packets: packets, Duration: duration, Throughput: throughput, Progress: progress,
			Exe: env.Exe,
		}
		var rep *calibrate.Report
		switch {
		case counts != nil && admitted:
			rep, err = runAdmittedCalibration(cmd.Context(), cfg, counts)
		case counts != nil:
			rep, err = runParallelCalibration(cmd.Context(), cfg, counts)
		default:
			rep, err = runCalibration(cmd.Context(), cfg)
		}
		if err != nil {
			if ctxErr := cmd.Context().Err(); ctxErr != nil {
				return ctxErr
			}
			return testbedError(fmt.Errorf("calibrate: %w", err))
		}
		if jsonOut {
			err = rep.WriteJSON(env.Stdout)
		} else {
			err = rep.WriteTable(env.Stdout)
		}
		if err != nil {
			return err
		}
		if failed := rep.Failed(); len(failed) > 0 {
			names := make([]string, len(failed))
			for i, f := range failed {
				names[i] = strings.TrimSpace(f.Direction + " " + f.Name)
			}
			return &ExitError{Code: ExitFailure,
				Err:  errors.New("calibration failed: outside tolerance: " + strings.Join(names, "; ")),
				Hint: "the machine may be too busy for the link's precision (other load, no SCHED_FIFO), or the emulator cannot carry the rate; see the warnings"}
		}
		return nil
	}
	return cmd
}

// newCalibrateBulkCmd is the bulk endpoint calibrate --throughput starts in
// a namespace (calibrate.BulkMain).
func newCalibrateBulkCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:    calibrate.BulkCommand + " server|client",
		Short:  "Bulk transfer endpoint of calibrate --throughput (internal)",
		Hidden: true,
		Long: `Started by quicbench calibrate --throughput inside a namespace, and driven over
stdin and stdout with quicbench's control protocol (JSON lines), its configuration the
first request. The server answers it with its addresses and CA certificate once it
listens and serves until the end of stdin; the client performs one transfer, with notes
as the measured window starts and ends, and answers with the result.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return calibrate.BulkMain(cmd.Context(), args[0], env.Stdin, env.Stdout)
		},
	}
}
