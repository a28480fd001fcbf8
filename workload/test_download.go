package workload

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() {
	define(plan.TestDownload, run{builtin: download, bench: &benchRun{
		query:   sizeQuery,
		metrics: benchDownload,
	}})
}

// sizeQuery is the bench page query of a test whose one parameter is size.
func sizeQuery(p plan.Params) url.Values {
	return url.Values{"size": {strconv.FormatInt(p.Size, 10)}}
}

// download fetches p.Size bytes on a fresh connection.
func download(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	fr, res, size, err := fetchBytes(ctx, spec, p.Size)
	if err != nil {
		return res, err
	}
	r := fr.Requests[0]
	if r.Bytes != size {
		return res, fmt.Errorf("received %d bytes, want %d", r.Bytes, size)
	}
	transferMetrics(res, fr, r, r.Sent, r.Bytes)
	return res, nil
}

// transferMetrics records the metrics of a transfer of bytes by request r
// that started at from: its completion from the connection's start, its
// duration and its goodput.
func transferMetrics(res *Result, fr *endpoint.FetchResult, r endpoint.RequestTiming, from, bytes int64) {
	c, _ := connOf(fr, r)
	res.Metrics["completion_ms"] = Ms(r.End - c.Start)
	goodputMetrics(res, r.End-from, bytes)
}

// goodputMetrics records a transfer's duration (ns) and goodput.
func goodputMetrics(res *Result, d, bytes int64) {
	res.Metrics["transfer_ms"] = Ms(d)
	res.Metrics["goodput_mbps"] = GoodputMbps(bytes, time.Duration(d))
	res.Metrics["bytes"] = float64(bytes)
}

// benchDownload: the page fetched /bytes/SIZE on the connection that
// loaded it and read the body through a stream reader; the transfer is
// timed from the request's start on the wire (Resource Timing
// requestStart) to the last chunk read.
func benchDownload(b *benchData, p plan.Params, res *Result) error {
	reqs, err := b.requestsOf(1)
	if err != nil {
		return err
	}
	q := reqs[0]
	if q.Bytes != p.Size {
		return fmt.Errorf("received %d bytes, want %d", q.Bytes, p.Size)
	}
	goodputMetrics(res, msToNs(q.End-b.sentAt(q)), q.Bytes)
	return nil
}

// sentAt is when a request started on the wire (Resource Timing
// requestStart), in ms from the measured part's start; the fetch() call
// when the browser did not say.
func (b *benchData) sentAt(q benchRequest) float64 {
	if e := b.entry(q.Name); e != nil && e.RequestStart > 0 {
		if t := e.RequestStart - b.T0; t >= q.Start && t <= q.End {
			return t
		}
	}
	return q.Start
}
