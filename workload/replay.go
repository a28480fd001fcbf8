package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/internal/hostmap"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// Replay is what a site sample of a recorded page (a HAR replayed by the
// server, package replay) needs beyond the server's target: the page to
// load and where every recorded origin is. Hosts and Origins cover every
// recorded page of the run, so that a browser kept across samples sees
// one mapping for the whole run.
type Replay struct {
	// Site is the archive's name on the server.
	Site string `json:"site"`
	// PageURL is the document the page load starts from.
	PageURL string `json:"page_url"`
	// Hosts maps every recorded host name of the run to its origin's
	// address in the server namespace.
	Hosts map[string]string `json:"hosts"`
	// Origins lists every host:port of the run: what a browser reaches
	// over QUIC directly for h3.
	Origins []string `json:"origins"`
	// URLs are this page's entries, the document first: what the built-in
	// client requests.
	URLs []string `json:"urls"`
}

// check verifies that the page's document is an https URL whose host is
// mapped.
func (r *Replay) check() (*url.URL, error) {
	u, err := url.Parse(r.PageURL)
	if err != nil {
		return nil, fmt.Errorf("replay: page URL %q: %v", r.PageURL, err)
	}
	if u.Scheme != "https" {
		return nil, fmt.Errorf("replay: page URL %q is not https", r.PageURL)
	}
	if _, ok := r.Hosts[u.Hostname()]; !ok {
		return nil, fmt.Errorf("replay: the page's host %s has no address", u.Hostname())
	}
	return u, nil
}

// resolve makes the run's recorded host names resolve to their replay
// addresses for the browsers this agent starts (hostmap: its private
// mount namespace), unless e.Resolve replaces it.
func (e *Executor) resolve(hosts map[string]string) error {
	if e.Resolve != nil {
		return e.Resolve(hosts)
	}
	_, err := hostmap.Set(hosts)
	return err
}

// replayOrigin is one origin's share of a built-in client's replay.
type replayOrigin struct {
	hostPort string
	host     string
	paths    []string
}

// replayBuiltin loads a recorded page with the built-in client: the
// document from its origin, then every other entry, each origin's at once
// over its own connection(s) (h2, h3: one; h1: up to six), all origins in
// parallel, each dialled at its replay address with its name (SNI and
// Host). The document's origin gets a second connection for its other
// entries: the built-in client does not parse the page. plt_ms is the
// time from the document's request to the last entry's last byte.
func (e *Executor) replayBuiltin(ctx context.Context, req Request) (*Result, error) {
	rp := req.Replay
	doc, err := rp.check()
	if err != nil {
		return nil, err
	}
	base, err := baseSpec(req)
	if err != nil {
		return nil, err
	}
	var origins []*replayOrigin
	byOrigin := map[string]*replayOrigin{}
	for _, raw := range rp.URLs[1:] {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "https" {
			continue // the browser would not load it over the sample's protocol either
		}
		hp := hostPort(u)
		o := byOrigin[hp]
		if o == nil {
			o = &replayOrigin{hostPort: hp, host: u.Hostname()}
			byOrigin[hp] = o
			origins = append(origins, o)
		}
		o.paths = append(o.paths, u.RequestURI())
	}
	specFor := func(host, hp string, paths []string) (endpoint.FetchSpec, error) {
		addr, ok := rp.Hosts[host]
		if !ok {
			return endpoint.FetchSpec{}, fmt.Errorf("replay: host %s has no address", host)
		}
		_, port, _ := net.SplitHostPort(hp)
		s := base
		s.Addr, s.ServerName, s.Paths, s.Parallel = net.JoinHostPort(addr, port), host, paths, len(paths)
		return s, nil
	}
	res := &Result{Metrics: map[string]float64{}}
	dspec, err := specFor(doc.Hostname(), hostPort(doc), []string{doc.RequestURI()})
	if err != nil {
		return nil, err
	}
	type done struct {
		fr     *endpoint.FetchResult
		origin string // https://host[:port]
	}
	originOf := func(host, hp string) string {
		if _, port, _ := net.SplitHostPort(hp); port != "443" {
			return "https://" + hp
		}
		return "https://" + host
	}
	start := time.Now()
	dfr, dres, err := fetch(ctx, dspec)
	var frs []done
	if dfr != nil {
		frs = append(frs, done{dfr, originOf(doc.Hostname(), hostPort(doc))})
	}
	if err == nil {
		var mu sync.Mutex
		var wg sync.WaitGroup
		var errs []error
		for _, o := range origins {
			s, serr := specFor(o.host, o.hostPort, o.paths)
			if serr != nil {
				errs = append(errs, serr)
				continue
			}
			wg.Go(func() {
				fr, _, ferr := fetch(ctx, s)
				mu.Lock()
				defer mu.Unlock()
				if fr != nil {
					frs = append(frs, done{fr, originOf(o.host, o.hostPort)})
				}
				if ferr != nil {
					errs = append(errs, fmt.Errorf("%s: %w", o.hostPort, ferr))
				}
			})
		}
		wg.Wait()
		err = errors.Join(errs...)
	}
	res.Wall = time.Since(start)
	if dres != nil {
		res.Negotiated = dres.Negotiated
	}
	var end time.Time
	conns := 0
	for _, d := range frs {
		fr := d.fr
		res.Transport = append(res.Transport, fr.Transport()...)
		res.Conns = append(res.Conns, fr.ConnRefs()...)
		res.Bytes += fr.Bytes
		conns += len(fr.Conns)
		for _, r := range fr.Requests {
			at := func(ns int64) int64 { return fr.Started.Add(time.Duration(ns)).Sub(start).Nanoseconds() }
			if t := fr.Started.Add(time.Duration(r.End)); r.End > 0 && t.After(end) {
				end = t
			}
			res.Resources = append(res.Resources, model.Resource{
				Name: d.origin + r.Path, Protocol: alpnName(fr.Negotiated),
				Start: at(r.Start), TTFB: at(r.FirstByte), End: at(r.End), Bytes: r.Bytes,
			})
		}
	}
	sort.SliceStable(res.Resources, func(i, j int) bool { return res.Resources[i].Start < res.Resources[j].Start })
	if err != nil {
		return res, err
	}
	if dfr != nil && len(dfr.Requests) > 0 {
		if c, ok := connOf(dfr, dfr.Requests[0]); ok && dfr.Requests[0].FirstByte > 0 {
			res.Metrics["ttfb_ms"] = Ms(dfr.Requests[0].FirstByte - c.Start)
		}
	}
	res.Metrics["plt_ms"] = float64(end.Sub(start)) / 1e6
	res.Metrics["resources"] = float64(len(res.Resources))
	res.Metrics["page_bytes"] = float64(res.Bytes)
	res.Metrics["connections"] = float64(conns)
	return res, nil
}

// hostPort is u's host:port, 443 when the URL names none.
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// replaySample takes a site sample of a recorded page: in a browser client
// of the registry (its loader sets the browser up for the replay's hosts
// and origins from req.Replay) or with the built-in client.
func (e *Executor) replaySample(ctx context.Context, req Request, r run, st *peers.Stack, impl ClientImpl) (*Result, error) {
	if err := plan.CheckParams(req.Test, req.Params); err != nil {
		return nil, err
	}
	if st == nil {
		if req.Params.Connection == plan.ConnWarm {
			return nil, errors.New("replay: the built-in client loads recorded pages cold only (connection: cold)")
		}
		return e.replayBuiltin(ctx, req)
	}
	if st.Client.Kind != peers.KindBrowser {
		return nil, fmt.Errorf("replay: client %s (a %s client) does not load recorded pages: the built-in client and the browsers do", req.Client, st.Client.Kind)
	}
	if _, err := req.Replay.check(); err != nil {
		return nil, err
	}
	if err := e.resolve(req.Replay.Hosts); err != nil {
		return nil, fmt.Errorf("replay: name mapping for the browser: %w", err)
	}
	return e.browserSample(ctx, req, r, st, impl)
}
