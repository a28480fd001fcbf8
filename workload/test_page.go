package workload

import (
	"context"
	"fmt"
	"net/url"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/plan"
)

func init() {
	define(plan.TestPage, run{
		path: func(p plan.Params) string {
			return fmt.Sprintf("/page/%d/%s", p.Objects, url.PathEscape(plan.FormatSize(p.Size)))
		},
		builtin: page,
	})
}

// page loads spec.Paths[0] as a page. With connection warm the endpoint
// first opens the connection and completes one unmeasured /echo on it, and
// the measured load (document, then its objects) starts on that connection;
// h1 and h1c open further connections for the objects as the page needs
// them, as in a cold load.
func page(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	warm := p.Connection == plan.ConnWarm
	spec.Page, spec.Warm = true, warm
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	doc := fr.Requests[0]
	dc, ok := connOf(fr, doc)
	reused := ok && dc.Start < fr.MeasureStart
	res.Metrics["connection_reused"] = boolMetric(reused)
	if warm {
		// The connection phases happened before the measured part: only
		// the document's first byte, from the start of the measured part.
		if doc.FirstByte > 0 {
			res.Metrics["ttfb_ms"] = Ms(doc.FirstByte - fr.MeasureStart)
		}
	} else {
		connectMetrics(fr, res)
	}
	var end int64
	for _, r := range fr.Requests {
		end = max(end, r.End)
		res.Resources = append(res.Resources, model.Resource{
			Name: r.Path, Protocol: alpnName(res.Negotiated), Start: r.Start, TTFB: r.FirstByte, End: r.End, Bytes: r.Bytes,
		})
	}
	res.Metrics["plt_ms"] = Ms(end - fr.MeasureStart)
	res.Metrics["resources"] = float64(len(fr.Requests))
	res.Metrics["page_bytes"] = float64(fr.Bytes)
	if warm && !reused {
		return res, &InvalidError{Reason: "connection warm: the document did not come over the warmed connection"}
	}
	return res, nil
}

func boolMetric(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// alpnName is the protocol name a browser reports for a connection
// (nextHopProtocol).
func alpnName(n model.Negotiated) string {
	if n.ALPN != "" {
		return n.ALPN
	}
	return "http/1.1"
}
