package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/quicbench/quicbench/endpoint/content"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
	"github.com/quicbench/quicbench/plan"
)

// ContractDecl, in a request, declares the contract stack its client is
// (peers.ContractDecl, its command absolute): the agent knows no plan, so
// the runner says what the stack is.
type ContractDecl = peers.ContractDecl

// ContractRunner runs a contract stack's client command (ROLE=client)
// with testcase and the URLs of REQUESTS, within timeout, and returns the
// directory it downloaded to (/downloads) and a function that removes
// what it left. Package peers/contract sets it.
var ContractRunner func(ctx context.Context, st *peers.Stack, testcase string, urls []string, timeout time.Duration) (downloads string, cleanup func(), err error)

// WireTimed, a metric of value 1, marks a sample whose client reported no
// timing of its own (a contract client): the runner computes its primary
// metric from what the emulator saw on the wire.
const WireTimed = "wire_timed"

// contractSample takes a sample with a contract client: the test's files
// requested at once (a page: its document and its objects), every body
// checked byte for byte against what quicbench's server sends. The sample
// carries no timing: the runner times it on the wire (WireTimed).
func (e *Executor) contractSample(ctx context.Context, req Request, st *peers.Stack) (*Result, error) {
	if ContractRunner == nil {
		return nil, fmt.Errorf("client %s: contract stacks cannot run in this agent", req.Client)
	}
	if err := plan.CheckParams(req.Test, req.Params); err != nil {
		return nil, err
	}
	paths, want, err := contractPaths(req)
	if err != nil {
		return nil, fmt.Errorf("client %s: %w", req.Client, err)
	}
	base := "https://" + net.JoinHostPort(req.Target.Host, strconv.Itoa(req.Target.Port))
	urls := make([]string, len(paths))
	for i, p := range paths {
		urls[i] = base + p
	}
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	start := time.Now()
	dl, cleanup, err := ContractRunner(ctx, st, peers.Testcase(req.Protocol), urls, timeout)
	if cleanup != nil {
		defer cleanup()
	}
	res := &Result{Metrics: map[string]float64{}, Wall: time.Since(start),
		Negotiated: model.Negotiated{ALPN: "h3", HTTPVersion: "HTTP/3.0", TLSVersion: "TLS 1.3", QUICVersion: "v1"}}
	if req.Protocol == model.ProtoQUIC {
		res.Negotiated = model.Negotiated{ALPN: "hq-interop", TLSVersion: "TLS 1.3", QUICVersion: "v1"}
	}
	if err != nil {
		return res, err
	}
	var total int64
	var errs []error
	for i, p := range paths {
		n, err := checkDownload(dl, p, want[i])
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
	}
	if len(errs) > 0 {
		return res, &InvalidError{Reason: "downloads: " + errors.Join(errs...).Error()}
	}
	res.Bytes = total
	res.Metrics["requests"] = float64(len(paths))
	res.Metrics["bytes"] = float64(total)
	res.Metrics[WireTimed] = 1
	return res, nil
}

// contractPaths are the paths a contract client requests for a sample, and
// the body each must have.
func contractPaths(req Request) (paths []string, want [][]byte, err error) {
	p := req.Params
	bytesBody := func(n int64) []byte {
		var b bytes.Buffer
		_, _ = content.WriteBody(&b, n)
		return b.Bytes()
	}
	switch req.Test {
	case plan.TestDownload, plan.TestTTFB:
		return []string{fmt.Sprintf("/bytes/%d", p.Size)}, [][]byte{bytesBody(p.Size)}, nil
	case plan.TestMultiplex:
		body := bytesBody(p.Size)
		for i := range p.Objects {
			paths = append(paths, fmt.Sprintf("/bytes/%d?object=%d", p.Size, i))
			want = append(want, body)
		}
		return paths, want, nil
	case plan.TestPage:
		doc := fmt.Sprintf("/page/%d/%s", p.Objects, plan.FormatSize(p.Size))
		pg, err := content.ParsePage(strconv.Itoa(p.Objects), plan.FormatSize(p.Size))
		if err != nil {
			return nil, nil, err
		}
		paths = append(paths, doc)
		want = append(want, pg.HTML(doc))
		for i := range pg.Objects {
			var b bytes.Buffer
			if err := content.WriteObject(&b, pg.ObjectSize(i)); err != nil {
				return nil, nil, err
			}
			paths = append(paths, content.ObjectPath(doc, i))
			want = append(want, b.Bytes())
		}
		return paths, want, nil
	}
	return nil, nil, fmt.Errorf("a contract client runs %s, not %s", peers.List(peers.ContractTests), req.Test)
}

// checkDownload checks the body a contract client downloaded for path p
// into dl: named by the path's last element, with its query or without
// (clients differ), it must equal want. It returns the body's length.
func checkDownload(dl, p string, want []byte) (int64, error) {
	u, err := url.Parse(p)
	if err != nil {
		return 0, err
	}
	names := []string{path.Base(u.Path)}
	if u.RawQuery != "" {
		names = []string{path.Base(u.Path) + "?" + u.RawQuery, path.Base(u.Path)}
	}
	var got []byte
	for _, n := range names {
		if got, err = os.ReadFile(filepath.Join(dl, n)); err == nil {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("not downloaded (no %s in /downloads)", strings.Join(names, " or "))
	}
	if !bytes.Equal(got, want) {
		return int64(len(got)), fmt.Errorf("%d bytes differ from the %d quicbench's server sends", len(got), len(want))
	}
	return int64(len(got)), nil
}
