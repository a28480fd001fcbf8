package plan

import (
	"bytes"
	"strconv"

	"gopkg.in/yaml.v3"
)

func scalar(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: v} }

func intNode(v int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(v, 10)}
}

func quoted(v string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: v}
}

func flowList(vals []string, ints bool) *yaml.Node {
	n := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
	for _, v := range vals {
		if ints {
			i, _ := strconv.ParseInt(v, 10, 64)
			n.Content = append(n.Content, intNode(i))
		} else {
			n.Content = append(n.Content, scalar(v))
		}
	}
	return n
}

// oneOrList writes a single value as a scalar and several as a flow list.
func oneOrList(vals []string, ints bool) *yaml.Node {
	if len(vals) == 1 {
		if ints {
			i, _ := strconv.ParseInt(vals[0], 10, 64)
			return intNode(i)
		}
		return scalar(vals[0])
	}
	return flowList(vals, ints)
}

type mapBuilder struct{ n *yaml.Node }

func newMap() mapBuilder { return mapBuilder{&yaml.Node{Kind: yaml.MappingNode}} }

func (m mapBuilder) add(k string, v *yaml.Node) {
	m.n.Content = append(m.n.Content, scalar(k), v)
}

// render writes the plan as canonical YAML: every field the plan sets, in
// schema order, values in canonical form. Parsing it gives the same plan.
func (p *Plan) render() []byte {
	d := &p.d
	top := newMap()
	top.add("name", scalar(p.Name))
	if p.Description != "" {
		top.add("description", scalar(p.Description))
	}
	top.add("seed", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(p.Seed, 10)})
	top.add("iterations", intNode(int64(d.iterations)))
	if d.precision > 0 {
		top.add("precision", scalar(strconv.FormatFloat(d.precision, 'g', -1, 64)+"%"))
		top.add("max_iterations", intNode(int64(d.maxIterations)))
	}
	if d.minEffectSet {
		// Not in the hash: it changes how samples are judged, not which.
		top.add("min_effect", scalar(strconv.FormatFloat(d.minEffect, 'g', -1, 64)+"%"))
	}
	if d.parallel > 0 {
		top.add("parallel", intNode(int64(d.parallel)))
	}
	if d.pin {
		// In the hash: pinning changes what the endpoints compete for.
		top.add("pin", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: "true"})
	}
	renderCapture(top, d.capture)
	top.add("warmup", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(d.warmup)})
	top.add("protocols", flowList(d.protocols, false))
	top.add("client", oneOrList(d.clients, false))
	if !defaultServers(d.servers) {
		// Only when chosen: the plans written before servers existed keep
		// their canonical text, and so their hash.
		top.add("server", oneOrList(d.servers, false))
	}
	top.add("cc", oneOrList(d.ccs, false))
	top.add("timeout", scalar(formatDuration(p.Timeout)))
	d.renderBrowser(top)
	if len(d.stacks) > 0 {
		list := &yaml.Node{Kind: yaml.SequenceNode}
		for _, st := range d.stacks {
			m := newMap()
			m.add("name", scalar(st.Name))
			m.add("command", scalar(st.Command))
			m.add("roles", flowList(st.Roles(), false))
			var protos []string
			if st.Server != nil {
				protos = st.Server.Protocols
			} else {
				protos = st.Client.Protocols
			}
			m.add("protocols", flowList(protos, false))
			list.Content = append(list.Content, m.n)
		}
		top.add("stacks", list)
	}
	if d.missingBodies == MissingFill {
		// Only when filling: plans without recorded pages keep their text.
		top.add("missing_bodies", scalar(MissingFill))
	}

	scen := &yaml.Node{Kind: yaml.SequenceNode}
	for _, s := range d.scenarios {
		m := newMap()
		if s.name != "" {
			m.add("name", scalar(s.name))
		}
		if s.isGrid() {
			if s.direction != "both" {
				m.add("direction", scalar(s.direction))
			}
			if s.base != "" {
				m.add("base", quoted(s.base))
			}
			g := newMap()
			for _, dim := range s.grid {
				g.add(dim.name, flowList(dim.values, false))
			}
			m.add("grid", g.n)
		} else {
			if s.link != nil {
				m.add("link", quoted(*s.link))
			}
			if s.up != nil {
				m.add("up", quoted(*s.up))
			}
			if s.down != nil {
				m.add("down", quoted(*s.down))
			}
			if s.traceUp != "" || s.traceDown != "" {
				t := newMap()
				if s.traceUp != "" {
					t.add("up", scalar(s.traceUp))
				}
				if s.traceDown != "" {
					t.add("down", scalar(s.traceDown))
				}
				m.add("trace", t.n)
			}
		}
		if s.competing != "" {
			m.add("competing", quoted(s.competing))
		}
		scen.Content = append(scen.Content, m.n)
	}
	top.add("scenarios", scen)

	tests := &yaml.Node{Kind: yaml.SequenceNode}
	for _, t := range d.tests {
		m := newMap()
		m.add("test", scalar(t.test))
		if t.iterations > 0 {
			m.add("iterations", intNode(int64(t.iterations)))
		}
		if t.warmup != nil {
			m.add("warmup", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(*t.warmup)})
		}
		if t.protocols != nil {
			m.add("protocols", flowList(t.protocols, false))
		}
		if t.clients != nil {
			m.add("client", oneOrList(t.clients, false))
		}
		if t.servers != nil {
			m.add("server", oneOrList(t.servers, false))
		}
		if t.timeout > 0 {
			m.add("timeout", scalar(formatDuration(t.timeout)))
		}
		if t.scenarios != nil {
			m.add("scenarios", flowList(t.scenarios, false))
		}
		if len(t.params) > 0 {
			def := lookupTest(t.test)
			pm := newMap()
			for _, pv := range t.params {
				pm.add(pv.name, oneOrList(pv.values, def.param(pv.name).kind == kindInt))
			}
			m.add("params", pm.n)
		}
		tests.Content = append(tests.Content, m.n)
	}
	top.add("tests", tests)

	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	// The tree holds only validated strings, so encoding cannot fail.
	_ = enc.Encode(top.n)
	_ = enc.Close()
	return buf.Bytes()
}
