package browser

import (
	"context"
	"net/url"
	"strings"

	"github.com/quicbench/quicbench/har"
)

// LoadHAR starts a browser with a fresh profile, loads opts.URL once as
// Load does, and returns with the load's Result its HAR: every request
// the browser made (DevTools network events), with timings, server
// addresses and, when bodies is set, response bodies (see Session.LoadHAR).
func LoadHAR(ctx context.Context, opts Options, bodies bool) (*Result, *har.HAR, error) {
	type both struct {
		r *Result
		h *har.HAR
	}
	b, err := once(ctx, opts, func(s *Session, u string) (both, error) {
		r, h, err := s.LoadHAR(ctx, u, bodies)
		return both{r, h}, err
	})
	return b.r, b.h, err
}

// LoadHAR is Load, also recording the load as a HAR 1.2 archive (nil when
// nothing could be recorded): each entry's response httpVersion is the
// protocol the load's check read for it (the resource's nextHopProtocol,
// "h3", "h2" or "http/1.1") when the page reported the resource, and its
// comment says so; other entries keep the protocol the network layer
// reported. Page timings are the load's DOMContentLoaded and load event.
// It returns Load's error (a *ProtocolMismatchError with both the Result
// and the archive).
func (s *Session) LoadHAR(ctx context.Context, pageURL string, bodies bool) (*Result, *har.HAR, error) {
	rec, stop, err := s.startRecording(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer stop()
	res, lerr := s.Load(ctx, pageURL)
	rec.settle(LoadEventWait)
	h, err := s.recorded(s.bctx, rec, "", RecordOptions{CreatorVersion: "load"}, bodies)
	if err != nil {
		return res, nil, err
	}
	MarkChecked(h, res)
	return res, h, lerr
}

// MarkChecked writes, into the entries of h that res reports, the
// protocol res's check read for them (response httpVersion, and a
// comment), and res's DOMContentLoaded and load times into the page
// timings. Entries are matched by URL (res names same-origin resources by
// path).
func MarkChecked(h *har.HAR, res *Result) {
	if h == nil || res == nil {
		return
	}
	base, _ := url.Parse(res.URL)
	byName := map[string]string{}
	for _, r := range res.Resources {
		byName[r.Name] = r.Protocol
	}
	for i := range h.Log.Entries {
		e := &h.Log.Entries[i]
		u, err := url.Parse(e.Request.URL)
		if err != nil {
			continue
		}
		u.Fragment = ""
		p, ok := byName[resourceName(base, u.String())]
		if !ok {
			p, ok = byName[u.String()]
		}
		if !ok {
			continue
		}
		e.Response.HTTPVersion = p
		note := "nextHopProtocol " + p + " (checked: want " + res.Protocol + ")"
		if e.Comment != "" {
			note = e.Comment + "; " + note
		}
		e.Comment = note
	}
	if len(h.Log.Pages) > 0 {
		pt := &h.Log.Pages[0].PageTimings
		if res.DOMContentLoaded > 0 {
			v := float64(res.DOMContentLoaded) / 1e6
			pt.OnContentLoad = &v
		}
		if res.Load > 0 {
			v := float64(res.Load) / 1e6
			pt.OnLoad = &v
		}
		if h.Log.Pages[0].Title == "" {
			h.Log.Pages[0].Title = strings.TrimSpace(res.URL)
		}
	}
}
