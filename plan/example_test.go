package plan_test

import (
	"fmt"

	"github.com/quicbench/quicbench/plan"
)

// Parse a plan from YAML, expand it into the cells a run measures, and
// list them: two protocols × two scenarios × one test, each cell with its
// primary metric and the number of samples it wants. plan.Builtin loads a
// built-in plan by name (plan.BuiltinNames lists them) and plan.Load a
// file; both give the same *Plan.
func Example() {
	const yaml = `
name: example
seed: 7
iterations: 12
protocols: [h2, h3]
scenarios:
  - name: clean
  - name: lossy
    link: "delay 25ms loss 1%"
tests:
  - test: download
    params: {size: 1MB}
`
	p, err := plan.Parse("example.yaml", []byte(yaml))
	if err != nil {
		fmt.Println(err)
		return
	}
	cells, err := p.Expand()
	if err != nil {
		fmt.Println(err)
		return
	}
	n := p.Counts()
	fmt.Printf("%s: %d cells, %d samples\n", p.Name, n.Cells, n.Samples)
	for _, c := range cells {
		fmt.Printf("%-45s %s in %s, %d iterations\n", c.Key, c.Metric, c.Unit, c.Iterations)
	}
	// Output:
	// example: 4 cells, 48 samples
	// clean/download/size=1MB/h2/builtin/cubic      goodput_mbps in Mbit/s, 12 iterations
	// clean/download/size=1MB/h3/builtin/cubic      goodput_mbps in Mbit/s, 12 iterations
	// lossy/download/size=1MB/h2/builtin/cubic      goodput_mbps in Mbit/s, 12 iterations
	// lossy/download/size=1MB/h3/builtin/cubic      goodput_mbps in Mbit/s, 12 iterations
}
