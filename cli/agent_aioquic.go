package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/quicbench/quicbench/endpoint"
	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers/aioquic"
	"github.com/quicbench/quicbench/workload"
)

// aioquicRcvBufEnv names the environment variable that, set to "default"
// in the agent's environment (the runner's), leaves the aioquic client's
// UDP receive buffer at the kernel's default instead of raising it: for
// studying the receiver drops it causes (docs/metrics.md, "aioquic").
const aioquicRcvBufEnv = "QUICBENCH_AIOQUIC_RCVBUF"

// aioquicFetcher returns the agent's client=aioquic sampler: every sample
// runs aioquic's client program (peers/aioquic/client.py) with the
// interpreter of its virtual environment, inside the client namespace like
// the agent. The interpreter is looked for once, at the first sample.
func aioquicFetcher(getenv func(string) string) workload.PeerFetch {
	find := sync.OnceValues(aioquic.FindPython)
	return func(ctx context.Context, req workload.Request, spec endpoint.FetchSpec) (*endpoint.FetchResult, map[string]float64, error) {
		py, err := find()
		if err != nil {
			return nil, nil, err
		}
		c := &aioquic.Client{Python: py}
		switch v := getenv(aioquicRcvBufEnv); v {
		case "":
		case "default":
			c.RcvBuf = -1
		default:
			return nil, nil, fmt.Errorf("%s=%q: want \"default\" or nothing", aioquicRcvBufEnv, v)
		}
		return c.Fetch(ctx, req, spec)
	}
}

// fetchAioquic runs spec with the aioquic client for quicbench fetch
// --client aioquic, verifying the server with the CA caPEM.
func fetchAioquic(ctx context.Context, spec endpoint.FetchSpec, caPEM []byte) (*endpoint.FetchResult, map[string]float64, error) {
	host, port, err := net.SplitHostPort(spec.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("server address %q: %w", spec.Addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return nil, nil, fmt.Errorf("server address %q: bad port", spec.Addr)
	}
	py, err := aioquic.FindPython()
	if err != nil {
		return nil, nil, err
	}
	req := workload.Request{Protocol: model.ProtoH3, Client: model.ClientAioquic,
		Target: workload.Target{Host: host, Port: p, CAPEM: string(caPEM)}}
	return (&aioquic.Client{Python: py}).Fetch(ctx, req, spec)
}
