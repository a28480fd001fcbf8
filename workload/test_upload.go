package workload

import (
	"context"
	"fmt"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() {
	define(plan.TestUpload, run{builtin: upload, bench: &benchRun{
		query:   sizeQuery,
		metrics: benchUpload,
	}})
}

// upload sends a request body of p.Size bytes on a fresh connection.
func upload(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	size := p.Size
	spec.Paths, spec.Upload = []string{"/upload"}, size
	fr, res, err := fetch(ctx, spec)
	if err != nil {
		return res, err
	}
	connectMetrics(fr, res)
	delete(res.Metrics, "ttfb_ms")
	r := fr.Requests[0]
	if r.UploadBytes != size {
		return res, fmt.Errorf("sent %d bytes, want %d", r.UploadBytes, size)
	}
	transferMetrics(res, fr, r, r.Start, size)
	if r.ServerUploadNanos > 0 {
		res.Metrics["server_receive_ms"] = Ms(r.ServerUploadNanos)
	}
	return res, nil
}

// benchUpload: the page POSTed a body of p.Size bytes (a Uint8Array) to
// /upload on the connection that loaded it; the transfer is timed from
// the request's start on the wire (Resource Timing requestStart) until the
// server's report was read, and the server must have received every byte.
func benchUpload(b *benchData, p plan.Params, res *Result) error {
	reqs, err := b.requestsOf(1)
	if err != nil {
		return err
	}
	q := reqs[0]
	if q.Upload != p.Size {
		return fmt.Errorf("sent %d bytes, want %d", q.Upload, p.Size)
	}
	if q.Server == nil || q.Server.Bytes != p.Size {
		got := int64(-1)
		if q.Server != nil {
			got = q.Server.Bytes
		}
		return fmt.Errorf("the server received %d bytes, want %d", got, p.Size)
	}
	goodputMetrics(res, msToNs(q.End-b.sentAt(q)), p.Size)
	if q.Server.Nanos > 0 {
		res.Metrics["server_receive_ms"] = Ms(q.Server.Nanos)
	}
	return nil
}
