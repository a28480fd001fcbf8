package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/quicbench/quicbench/capture"
	"github.com/quicbench/quicbench/emu"
	"github.com/quicbench/quicbench/forward"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// Evidence per sample (docs/data.md, "Evidence"): with capture: pcap (or
// --capture) the emulator's tap records every packet of the testbed, and
// each sample keeps the packets between its start and its end as a pcapng
// file with the TLS secrets of its connections embedded; with --keylog the
// sample keeps its key log lines, with --qlog the server's qlog files of
// its connections. The tap also gives each sample its wire timing
// (wire_* metrics), with a capture or with Options.WireTiming alone.

// runCapture is a run's capture settings and shared state.
type runCapture struct {
	spec   plan.CaptureSpec
	wire   bool // the tap runs: pcap capture or WireTiming
	budget *capture.Budget
	warned sync.Once // the budget's run warning
}

// setupCapture decides what the run captures and, for a resumed run,
// what its captures already hold of the limit.
func (r *run) setupCapture(ctx context.Context) error {
	c := &runCapture{spec: r.plan.Capture().Merge(r.opts.Capture)}
	if len(c.spec.Kinds) == 0 && (c.spec.Snap != 0 || c.spec.Limit != 0) {
		return errors.New("a capture snap length or limit without a capture: add --capture (or capture: pcap to the plan)")
	}
	// a contract client's samples are timed on the wire
	c.wire = c.spec.Pcap() || r.opts.WireTiming || usesContractClients(r.cells)
	if c.spec.Pcap() {
		used, err := r.db.RunEvidenceBytes(ctx, r.runRec.ID, model.EvidenceCapture)
		if err != nil {
			return err
		}
		c.budget = capture.NewBudget(c.spec.LimitBytes() - used)
	}
	r.cap = c
	return nil
}

// tapOptions are the testbed's tap options: nil when nothing needs it.
func (r *run) tapOptions() *forward.TapOptions {
	if r.cap == nil || !r.cap.wire {
		return nil
	}
	snap := r.cap.spec.SnapLen()
	if !r.cap.spec.Pcap() {
		snap = plan.SnapHeaders // wire timing reads headers only
	}
	return &forward.TapOptions{Snap: snap}
}

// slotCapture is a testbed's capture: the session draining its tap, its
// directory (segments, key logs, sample files) and the key logs followed.
type slotCapture struct {
	sess       *capture.Session
	dir        string
	serverKeys string // the server's key log ("" for none)
	clientKeys string // the client's ("" for none)
	keys       *capture.KeyLogs
}

// startCapture starts the testbed's capture session, when the run
// captures, keeps key logs or HARs; it runs before the endpoints start
// (they write key logs into its directory).
func (r *slot) startCapture() error {
	if !r.cap.wire && r.opts.KeyLogDir == "" && !r.cap.spec.HAR() {
		return nil
	}
	dir, err := os.MkdirTemp("", "quicbench-capture-")
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	sc := &slotCapture{dir: dir}
	r.capt = sc
	if r.cap.wire {
		opts := capture.Options{Dir: dir, Budget: r.cap.budget, CountOnly: !r.cap.spec.Pcap()}
		if sc.sess, err = capture.Start(r.tb, opts); err != nil {
			return err
		}
	}
	switch {
	case r.opts.KeyLogDir != "":
		if err := os.MkdirAll(r.opts.KeyLogDir, 0o700); err != nil {
			return err
		}
		name := fmt.Sprintf("run%d.keys", r.runRec.ID)
		if r.id > 0 {
			name = fmt.Sprintf("run%d-testbed%d.keys", r.runRec.ID, r.id)
		}
		sc.serverKeys = filepath.Join(r.opts.KeyLogDir, name)
	case r.cap.spec.Pcap():
		sc.serverKeys = filepath.Join(dir, "server.keys")
	}
	if r.cap.spec.Pcap() {
		sc.clientKeys = filepath.Join(dir, "client.keys")
	}
	sc.keys = capture.FollowKeyLogs(sc.serverKeys, sc.clientKeys)
	return nil
}

// closeCapture stops the session and removes the directory.
func (r *slot) closeCapture() {
	if r.capt == nil {
		return
	}
	if r.capt.sess != nil {
		r.capt.sess.Close()
	}
	os.RemoveAll(r.capt.dir)
}

// serverKeyLog is the key log file of a server of implementation impl
// (serve --keylog), "" when its stack writes none (Caddy cannot).
func (r *slot) serverKeyLog(impl string) string {
	if st, ok := peers.ServerStack(impl); r.capt == nil || !ok || !st.KeyLog {
		return ""
	}
	return r.capt.serverKeys
}

// sampleCapture is what a sample's capture collects between its start
// and its end.
type sampleCapture struct {
	r        *slot
	seg      *capture.Segment
	up, down [2]emu.Counters // the links' counters at the start and end marks
	err      error           // a capture failure, reported as a warning
	qlogs    map[string]bool // the qlog directory's files at the start
	files    []string        // files to remove once the sample is stored
	ev       []model.Evidence
	warnings []string // run warnings about the sample's capture
	harFile  string   // the browser's HAR of the sample (capture: har), "" for none
	// wire is the sample's timing as its packets show it (wireOK: the tap
	// ran): store adds its metrics; runner code for stacks that report no
	// timing of their own reads it here.
	wire   capture.WireTiming
	wireOK bool
}

// captureBegin starts a sample's capture just before its counters are
// read, for the flows to the server's ports.
func (r *slot) captureBegin(req *requestInfo) *sampleCapture {
	if r.capt == nil && r.opts.QlogDir == "" {
		return nil
	}
	sc := &sampleCapture{r: r}
	if r.opts.QlogDir != "" {
		sc.qlogs = map[string]bool{}
		for _, n := range listDir(r.opts.QlogDir) {
			sc.qlogs[n] = true
		}
	}
	if r.capt != nil && r.capt.sess != nil {
		var err error
		sc.up[0], sc.down[0], err = r.capt.sess.Begin(req.ports...)
		if err != nil {
			sc.err = err
		}
	}
	return sc
}

// requestInfo is what captureBegin needs of the sample's request.
type requestInfo struct{ ports []uint16 }

// capturePorts are the server ports of the sample's flows.
func capturePorts(port, plainPort int) *requestInfo {
	ri := &requestInfo{}
	for _, p := range []int{port, plainPort} {
		if p > 0 && p < 1<<16 {
			ri.ports = append(ri.ports, uint16(p))
		}
	}
	return ri
}

// captureEnd ends a sample's capture just after its counters are read,
// and makes the window's link counters those of the capture's marks, so
// that the capture's verdicts count exactly what the stored counters
// count. It writes the pcapng file and collects the evidence, metrics and
// warnings that captureStore adds to the sample.
func (sc *sampleCapture) end(ctx context.Context, c *model.Cell, it int, w *window) {
	if sc == nil {
		return
	}
	r := sc.r
	var keys []byte
	if r.capt != nil && r.capt.keys != nil {
		var err error
		if keys, err = r.capt.keys.Take(); err != nil {
			sc.warnings = append(sc.warnings, "key log: "+err.Error())
		}
	}
	if r.capt != nil && r.capt.sess != nil && sc.err == nil {
		seg, up, down, err := r.capt.sess.End()
		if err != nil {
			sc.err = err
		} else {
			sc.seg = seg
			sc.files = append(sc.files, seg.Path())
			sc.up[1], sc.down[1] = up, down
			w.before.link = [2]emu.Counters{sc.up[0], sc.down[0]}
			w.after.link = [2]emu.Counters{sc.up[1], sc.down[1]}
			sc.wire, sc.wireOK = seg.Wire(), true
			sc.checkCounts(c, it)
			if r.cap.spec.Pcap() {
				sc.writePcap(c, it, keys)
			}
		}
	}
	if sc.err != nil {
		sc.warnings = append(sc.warnings, fmt.Sprintf("capture of %s iteration %d failed: %v", c.Key, it, sc.err))
	}
	if len(keys) > 0 {
		sc.ev = append(sc.ev, model.Evidence{Name: "keys.log", Kind: model.EvidenceKeyLog, Data: keys})
	}
	if sc.harFile != "" {
		// the client wrote it, or said in the sample's warnings why not
		if b, err := os.ReadFile(sc.harFile); err == nil && len(b) > 0 {
			sc.ev = append(sc.ev, model.Evidence{Name: "page.har", Kind: model.EvidenceHAR, Data: b})
		}
		os.Remove(sc.harFile)
	}
	if sc.qlogs != nil {
		for _, n := range listDir(r.opts.QlogDir) {
			if !sc.qlogs[n] && strings.Contains(n, "qlog") {
				sc.ev = append(sc.ev, model.Evidence{Name: n, Kind: model.EvidenceQlog, Path: filepath.Join(r.opts.QlogDir, n)})
			}
		}
	}
}

// checkCounts compares the capture with the links' counters: they agree
// by construction, less what the capture could not record, which a run
// warning names.
func (sc *sampleCapture) checkCounts(c *model.Cell, it int) {
	g := sc.seg
	for d, cs := range [][2]emu.Counters{sc.up, sc.down} {
		k := cs[1].Sub(cs[0])
		got := g.Verdicts[d][0] + g.Verdicts[d][1] + g.Verdicts[d][2] + g.Verdicts[d][3] + g.Verdicts[d][4] + g.Verdicts[d][5]
		want := k.PacketsOut + k.DropLoss + k.DropQueue + k.DropMTU + k.DropOff + k.DropFlush
		if got+g.Cut[d] != want {
			sc.warnings = append(sc.warnings, fmt.Sprintf("capture of %s iteration %d: %d packets %s recorded and %d cut, the link counted %d",
				c.Key, it, got, dirName(d), g.Cut[d], want))
		}
	}
	if n := g.Cut[0] + g.Cut[1]; n > 0 {
		sc.warnings = append(sc.warnings, fmt.Sprintf("capture of %s iteration %d: %d packets not recorded (the tap's ring was full: the capture writer fell behind); the pcapng's interface statistics count them",
			c.Key, it, n))
	}
	if g.Over[0]+g.Over[1] > 0 {
		r := sc.r
		r.cap.warned.Do(func() {
			sc.warnings = append(sc.warnings, fmt.Sprintf("capture limit of %s reached during %s iteration %d: later samples' captures hold no packets (capture_limit, --capture-limit)",
				plan.FormatSize(r.cap.spec.LimitBytes()), c.Key, it))
		})
	}
}

func dirName(d int) string {
	if d == 0 {
		return "up"
	}
	return "down"
}

// writePcap assembles the sample's pcapng file with its secrets.
func (sc *sampleCapture) writePcap(c *model.Cell, it int, keys []byte) {
	r := sc.r
	path := filepath.Join(r.capt.dir, "capture.pcapng")
	what := fmt.Sprintf("quicbench run %d, %s iteration %d", r.runRec.ID, c.Key, it)
	if err := sc.seg.WriteFile(path, sc.seg.Info(what, r.cap.spec.SnapLen(), r.runRec.Env.Version), keys); err != nil {
		sc.warnings = append(sc.warnings, fmt.Sprintf("capture of %s iteration %d: %v", c.Key, it, err))
		return
	}
	sc.files = append(sc.files, path)
	sc.ev = append(sc.ev, model.Evidence{Name: "capture.pcapng", Kind: model.EvidenceCapture, Path: path})
}

// store adds the capture's metrics and evidence to the sample (just
// before it is stored) and records its run warnings.
func (sc *sampleCapture) store(ctx context.Context, s *model.Sample) {
	if sc == nil {
		return
	}
	if m := sc.wire.Metrics(); sc.wireOK && len(m) > 0 {
		if s.Metrics == nil {
			s.Metrics = map[string]float64{}
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if _, set := s.Metrics[k]; !set {
				s.Metrics[k] = m[k]
			}
		}
	}
	s.Evidence = append(s.Evidence, sc.ev...)
	for _, w := range sc.warnings {
		_ = sc.r.db.AddRunWarning(context.WithoutCancel(ctx), sc.r.runRec.ID, w)
	}
}

// cleanup removes the sample's temporary files.
func (sc *sampleCapture) cleanup() {
	if sc == nil {
		return
	}
	for _, f := range sc.files {
		os.Remove(f)
	}
}

// listDir returns the names in dir (none when it cannot be read).
func listDir(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(ents))
	for _, e := range ents {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// harFileFor is where the browser of cell c's sample writes its HAR
// (capture: har), "" when the sample keeps none: a browser client's page
// and site samples, in the testbed's capture directory.
func (r *slot) harFileFor(c *model.Cell) string {
	st, ok := peers.ClientStack(c.Client)
	if r.capt == nil || !r.cap.spec.HAR() || !ok || st.Client.Kind != peers.KindBrowser || (c.Test != plan.TestPage && c.Test != plan.TestSite) {
		return ""
	}
	f := filepath.Join(r.capt.dir, "page.har")
	os.Remove(f) // a previous sample's, if it was not taken
	return f
}
