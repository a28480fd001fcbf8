package plan

import (
	"time"

	"github.com/quicbench/quicbench/peers"
)

// What a sample of a browser client costs the reference machine, in time
// and in CPU, is its stack's: peers/NAME/stack.yaml gives the wall time of
// the browser's life cycle around a sample (client.overhead), its own work
// inside a page load (client.work) and, in client.cost, the CPU of that
// life cycle, of each page and of the sample's network work per
// transport, and the memory a running browser holds. The estimate
// (estimateParams) and the admission rule (CellLoad, MemoryLimits) read
// them through browserCostOf and nothing else about browsers.
// docs/plan-format.md ("Estimated duration", "Parallel testbeds") and
// docs/performance.md ("Browser samples: time and CPU") say how they were
// measured.

// browserCost is what one browser client's sample costs beyond the
// network work the built-in client's would do.
type browserCost struct {
	// stack names the browser whose costs these are (an audit client's is
	// the stack it uses): a testbed may keep one of each running.
	stack string
	// overhead is the wall time of the browser's life cycle around a
	// sample, and sampleCPU the CPU time of the browser's processes for it.
	overhead, sampleCPU time.Duration
	// pageWork is the browser's own time inside each page it loads (a page
	// test's page, the bench page), and pageCPU the CPU time of a page
	// load beyond its requests and bytes.
	pageWork, pageCPU time.Duration
	// tcp and quic are the CPU the browser's processes spend on a
	// sample's requests, bytes and open seconds, per transport (its
	// network service, its IPC to the page, the page's script reading the
	// bytes, the page's timers and frames).
	tcp, quic endpointCPU
	// memory is what one running browser holds, in bytes.
	memory int64
}

// browserCostOf returns the costs of a browser client (a browser or an
// audit client of the registry), and false for a client that loads no
// pages in a browser. An audit client without costs of its own
// (Lighthouse) costs what the browser stack it uses does, its own
// overhead and work aside.
func browserCostOf(client string) (browserCost, bool) {
	st, ok := peers.ClientStack(client)
	if !ok || st.Client == nil || (st.Client.Kind != peers.KindBrowser && st.Client.Kind != peers.KindAudit) {
		return browserCost{}, false
	}
	cl := st.Client
	bc := browserCost{stack: st.Name, overhead: time.Duration(cl.Overhead), pageWork: time.Duration(cl.Work)}
	cost := cl.Cost
	for _, u := range st.Uses {
		if cost != nil {
			break
		}
		if us, ok := peers.Lookup(u); ok && us.Client != nil && us.Client.Cost != nil {
			cost, bc.stack = us.Client.Cost, us.Name
		}
	}
	if cost != nil {
		bc.sampleCPU = time.Duration(cost.SampleCPU)
		bc.pageCPU = time.Duration(cost.PageCPU)
		bc.tcp = netCost(cost.TCP)
		bc.quic = netCost(cost.QUIC)
		bc.memory = int64(cost.MemoryMB) << 20
	}
	return bc, true
}

func netCost(n peers.NetCost) endpointCPU {
	return endpointCPU{perRequest: time.Duration(n.PerRequest), perMB: time.Duration(n.PerMB), perSecond: time.Duration(n.PerSecond)}
}
