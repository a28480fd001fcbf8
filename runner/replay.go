package runner

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/quicbench/quicbench/endpoint/replay"
	"github.com/quicbench/quicbench/har"
	"github.com/quicbench/quicbench/internal/sites"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/netns"
	"github.com/quicbench/quicbench/plan"
	"github.com/quicbench/quicbench/workload"
)

// replayRun is what a run replays: the recorded pages of its site cells,
// one layout of their origins for the whole run, and each testbed's
// addresses for it.
type replayRun struct {
	sites   []replay.SiteSpec
	byParam map[string]string // site parameter value -> archive name
	pages   map[string]*replay.Archive
	layout  *replay.Layout // without addresses
	notes   []string       // run warnings: what was filled

	mu     sync.Mutex
	bySlot map[int]*replay.Layout // testbed -> layout with its addresses
	specs  map[int]string         // testbed -> spec file
}

// archiveName is a name for a recorded page on the server: the built-in
// page's, or the file's base name, made unique with its position.
var nameUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func archiveName(i int, site string) string {
	if sites.IsPage(site) {
		return site
	}
	b := strings.TrimSuffix(filepath.Base(site), filepath.Ext(site))
	b = nameUnsafe.ReplaceAllString(b, "-")
	if len(b) > 40 {
		b = b[:40]
	}
	return fmt.Sprintf("har%d-%s", i, b)
}

// addReplaySite prepares a recorded page of the plan (its index only:
// the server decodes the bodies) and returns its archive name.
func (r *run) addReplaySite(site string) (string, error) {
	if r.replay == nil {
		r.replay = &replayRun{byParam: map[string]string{}, pages: map[string]*replay.Archive{},
			bySlot: map[int]*replay.Layout{}, specs: map[int]string{}}
	}
	rp := r.replay
	if n, ok := rp.byParam[site]; ok {
		return n, nil
	}
	name := archiveName(len(rp.sites), site)
	file := site
	var h *har.HAR
	var err error
	if sites.IsPage(site) {
		if err := r.ensureSiteDir(); err != nil {
			return "", err
		}
		b, err := sites.PageHAR(site)
		if err != nil {
			return "", err
		}
		file = filepath.Join(r.siteDir, site+".har")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			return "", err
		}
		h, err = sites.Page(site)
		if err != nil {
			return "", err
		}
	} else if h, err = har.ReadFile(site); err != nil {
		return "", fmt.Errorf("site %s: %w", site, err)
	}
	policy := r.plan.MissingBodies()
	a, err := replay.Prepare(name, h, replay.Options{Missing: policy, IndexOnly: true})
	if err != nil {
		return "", fmt.Errorf("site %s: %w", site, err)
	}
	if s := a.Summary; s.Missing > 0 {
		what := "entries"
		if s.Missing == 1 {
			what = "entry"
		}
		rp.notes = append(rp.notes, fmt.Sprintf("site %s: %d %s without a body (%d bytes) served with filler bytes of the recorded size (missing_bodies: fill)", site, s.Missing, what, s.MissingBytes))
	}
	rp.sites = append(rp.sites, replay.SiteSpec{Name: name, HAR: file, Missing: policy})
	rp.byParam[site] = name
	rp.pages[name] = a
	return name, nil
}

// ensureSiteDir creates the run's directory of generated files.
func (r *run) ensureSiteDir() error {
	if r.siteDir != "" {
		return nil
	}
	d, err := os.MkdirTemp("", "quicbench-sites-")
	if err != nil {
		return err
	}
	r.siteDir = d
	return nil
}

// finishReplay lays the run's recorded pages out and records the filled
// bodies as run warnings.
func (r *run) finishReplay(ctx context.Context) error {
	rp := r.replay
	if rp == nil {
		return nil
	}
	var archives []*replay.Archive
	for _, s := range rp.sites {
		archives = append(archives, rp.pages[s.Name])
	}
	l, err := replay.NewLayout(archives...)
	if err != nil {
		return err
	}
	rp.layout = l
	for _, n := range rp.notes {
		if err := r.db.AddRunWarning(context.WithoutCancel(ctx), r.runRec.ID, n); err != nil {
			return fmt.Errorf("store a run warning: %w", err)
		}
	}
	return nil
}

// replayServerArgs are the server arguments of a testbed that serves the
// run's recorded pages: it puts every origin's address on the server
// side's device and writes the spec the server reads.
func (r *slot) replayServerArgs() ([]string, error) {
	rp := r.replay
	if rp == nil || rp.layout == nil {
		return nil, nil
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if f, ok := rp.specs[r.id]; ok {
		return []string{"--replay", f}, nil
	}
	l := &replay.Layout{Groups: slices.Clone(rp.layout.Groups)}
	if err := l.Assign(r.tb.Addr(netns.Server)); err != nil {
		return nil, err
	}
	if err := r.tb.AddAddrs(netns.Server, l.Addrs()...); err != nil {
		return nil, fmt.Errorf("replay addresses: %w", err)
	}
	if err := r.ensureSiteDir(); err != nil {
		return nil, err
	}
	f := filepath.Join(r.siteDir, fmt.Sprintf("replay-testbed%d.json", r.id))
	if err := replay.WriteSpec(f, &replay.Spec{Sites: rp.sites, Layout: *l}); err != nil {
		return nil, err
	}
	rp.bySlot[r.id], rp.specs[r.id] = l, f
	return []string{"--replay", f}, nil
}

// replayBegin prepares a site sample of a recorded page: the request's
// Replay and the server's count from zero. It returns false for any
// other sample.
func (r *slot) replayBegin(c *model.Cell, req *workload.Request) (bool, error) {
	rp := r.replay
	if rp == nil || c.Test != plan.TestSite {
		return false, nil
	}
	site, _ := c.Factor("site")
	name, ok := rp.byParam[site]
	if !ok {
		return false, nil
	}
	rp.mu.Lock()
	l := rp.bySlot[r.id]
	rp.mu.Unlock()
	if l == nil {
		return false, fmt.Errorf("replay: testbed %d serves no recorded page", r.id)
	}
	if !slices.Contains(r.srv.info.Replay, name) {
		return false, fmt.Errorf("replay: the server does not serve %s (it serves %v)", name, r.srv.info.Replay)
	}
	a := rp.pages[name]
	req.Replay = &workload.Replay{Site: name, PageURL: a.PageURL, Hosts: l.HostAddrs(), Origins: l.Origins(), URLs: a.URLs()}
	r.srv.mu.Lock()
	err := r.srv.ctl.ReplayBegin(name, c.Protocol)
	r.srv.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("replay: begin %s on the server: %w", name, err)
	}
	return true, nil
}

// replayEnd adds what the server replayed to the sample: the replay_*
// metrics (docs/metrics.md) and, for a sample that was valid, its
// verdict: invalid when a request reached another origin's address or a
// connection or request used another protocol than the cell's, or when
// nothing was served; a warning for every unmatched request.
func (r *slot) replayEnd(s *model.Sample, proto string) {
	r.srv.mu.Lock()
	st, err := r.srv.ctl.ReplayEnd()
	r.srv.mu.Unlock()
	if err != nil {
		s.Warnings = append(s.Warnings, fmt.Sprintf("replay statistics unavailable: %v", err))
		return
	}
	conns := st.Connections()
	m := s.Metrics
	m["replay_requests"] = float64(st.Requests)
	m["replay_unmatched"] = float64(st.Unmatched)
	m["replay_filled"] = float64(st.Filled)
	m["replay_preflights"] = float64(st.Preflights)
	m["replay_misrouted"] = float64(st.Misrouted)
	m["replay_wrong_protocol"] = float64(st.WrongProtocol)
	m["replay_bytes"] = float64(st.Bytes)
	m["replay_origins"] = float64(len(st.Origins))
	total, most := 0, 0
	for _, o := range st.Origins {
		total += o.ConnTotal()
		most = max(most, o.ConnTotal())
	}
	m["replay_connections"] = float64(total)
	m["replay_connections_max_origin"] = float64(most)
	for p, n := range conns {
		m["replay_connections_"+metricProto(p)] = float64(n)
	}
	if st.Unmatched > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf("replay: %d requests matched no recorded entry (404): %s", st.Unmatched, strings.Join(st.UnmatchedURLs, ", ")))
	}
	s.Timelines = append(s.Timelines, originSeries(st)...)
	if s.Status != model.StatusOK {
		return
	}
	var why []string
	if st.Misrouted > 0 {
		why = append(why, fmt.Sprintf("%d requests or connections reached another origin's address", st.Misrouted))
	}
	if st.WrongProtocol > 0 {
		why = append(why, fmt.Sprintf("%d connections or requests used another protocol than %s (server side: %v)", st.WrongProtocol, proto, conns))
	}
	if st.Requests == 0 {
		why = append(why, "the replay served no request")
	}
	if len(why) > 0 {
		s.Status = model.StatusInvalid
		s.Error = "invalid sample: replay: " + strings.Join(why, "; ")
	}
}

// metricProto names a protocol in a metric's name.
func metricProto(alpn string) string {
	switch alpn {
	case "http/1.1":
		return "h1"
	}
	return alpn
}

// The timeline kinds of a replayed sample's origins: one series per
// origin (Label "HOST ADDRESS") of requests answered and of body bytes
// sent, and one per origin and protocol (Label "HOST ADDRESS PROTOCOL") of
// connections; each holds one point at T = 0.
const (
	SeriesReplayRequests = "replay_requests"
	SeriesReplayBytes    = "replay_bytes"
	SeriesReplayConns    = "replay_conns"
)

// originSeries is what each origin served, as timelines (the store keeps
// any kind; the report draws none of these).
func originSeries(st replay.Stats) []model.Series {
	var out []model.Series
	one := func(kind, label string, v float64) {
		out = append(out, model.Series{Kind: kind, Label: label, Points: []model.Point{{T: 0, V: v}}})
	}
	for _, o := range st.Origins {
		label := o.Host + " " + o.Addr
		one(SeriesReplayRequests, label, float64(o.Requests))
		one(SeriesReplayBytes, label, float64(o.Bytes))
		protos := make([]string, 0, len(o.Conns))
		for p := range o.Conns {
			protos = append(protos, p)
		}
		slices.Sort(protos)
		for _, p := range protos {
			one(SeriesReplayConns, label+" "+p, float64(o.Conns[p]))
		}
	}
	return out
}

// replayCapturePorts adds the ports of the recorded origins (443 unless
// their URLs say otherwise) to the server ports of a sample's capture, so
// that its wire timing sees the flows of a replayed page; rp is nil for
// any other sample.
func replayCapturePorts(ri *requestInfo, rp *workload.Replay) *requestInfo {
	if rp == nil {
		return ri
	}
	for _, o := range rp.Origins {
		_, p, err := net.SplitHostPort(o)
		if err != nil {
			continue
		}
		if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 1<<16 && !slices.Contains(ri.ports, uint16(n)) {
			ri.ports = append(ri.ports, uint16(n))
		}
	}
	return ri
}
