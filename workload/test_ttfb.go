package workload

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/plan"
)

func init() {
	define(plan.TestTTFB, run{builtin: ttfb, bench: &benchRun{
		query: func(p plan.Params) url.Values {
			return url.Values{"size": {strconv.FormatInt(p.Size, 10)}}
		},
		metrics: benchTTFB,
	}})
}

// ttfb fetches p.Size bytes on a fresh connection for its first byte.
func ttfb(ctx context.Context, _ *Executor, spec endpoint.FetchSpec, p plan.Params) (*Result, error) {
	_, res, _, err := fetchBytes(ctx, spec, p.Size)
	if err != nil {
		return res, err
	}
	if _, ok := res.Metrics["ttfb_ms"]; !ok {
		return res, errors.New("no first byte recorded")
	}
	return res, nil
}

// benchTTFB: the measured resource is the bench page's document, padded
// to p.Size bytes and loaded by a browser that has just started with a
// fresh profile, so over the first connection it ever opened, with nothing
// to resume. ttfb_ms is the document's first byte from the navigation's
// start (Navigation Timing responseStart - startTime): the browser's own
// connection timing is no measure here, since Chromium preconnects to the
// origin of a navigation as it starts and then reports a connection of
// zero length. The measured part is the navigation until the document's
// last byte.
func benchTTFB(b *benchData, p plan.Params, res *Result) error {
	nav := b.navHere
	if int64(nav.EncodedBodySize) != p.Size {
		return fmt.Errorf("the bench document has %d bytes, want %d", int64(nav.EncodedBodySize), p.Size)
	}
	if !(nav.ResponseStart > nav.StartTime) {
		return fmt.Errorf("the bench document's navigation entry has no first byte (responseStart %s ms)", fmtMs(nav.ResponseStart))
	}
	res.Metrics["ttfb_ms"] = nav.ResponseStart - nav.StartTime
	res.Bytes = p.Size
	res.Prep = time.Duration(msToNs(b.TimeOrigin + nav.StartTime))
	res.Wall = time.Duration(msToNs(nav.ResponseEnd - nav.StartTime))
	return nil
}
