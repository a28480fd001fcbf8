package plan

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/quicbench/quicbench/model"
	"github.com/quicbench/quicbench/peers"
)

// pos is a position in the plan text (1-based; zero when unknown).
type pos struct{ line, col int }

// doc is a plan as written, after validation of each field on its own.
type doc struct {
	name, description string
	seed              uint64
	iterations        int
	precision         float64     // adaptive iterations: target half-width, % of the median; 0 = fixed iterations
	maxIterations     int         // adaptive iterations: the most a group takes (set whenever precision is)
	maxIterAt         pos         // where max_iterations is set; zero when it is not
	parallel          int         // testbeds at once (quicbench run --parallel); 0 = not set
	minEffect         float64     // smallest effect of interest, % of the reference median; 0 = off (when set)
	minEffectSet      bool        // min_effect is given
	pin               bool        // emulator, server and client on CPUs of their own (netns.Config.Pin)
	capture           CaptureSpec // evidence per sample (capture.go)
	warmup            bool
	timeout           time.Duration
	protocols         []string
	clients           []string
	servers           []string
	ccs               []string
	timeoutAt         scalarAt // where timeout is set; zero when it is not
	protoPos          pos
	clientPos         pos
	scenarios         []scenDoc
	tests             []testDoc
	resolved          bool // a relative path was resolved against the plan's directory
	// browser clients (plan/browser.go): "" (auto) or "always"; bytes, 0 = the agent's default
	browserRestart     string
	browserMemoryLimit int64
	browserFileLimit   int64 // 0 = the agent's default
	// stacks are the contract stacks the plan declares (stacks:), their
	// commands made absolute; declared in the registry (peers.Declare)
	stacks        []*peers.Stack
	missingBodies string // missing_bodies: "" (refuse), MissingRefuse or MissingFill
	// harNotes are what the plan's HAR sites hold, one note each, in the
	// order the plan names them (checked files only).
	harNotes []string
}

// scenDoc is one entry of scenarios: a named scenario or a grid block.
type scenDoc struct {
	at    pos
	index int
	name  string
	// named scenario
	link, up, down      *string
	traceUp, traceDown  string
	linkPos, upPos, dnP pos
	// grid block
	grid      []gridDim
	direction string
	base      string
	basePos   pos
	gridPos   pos
	// competing traffic: canonical traffic spec, "" for none
	competing string
}

func (s *scenDoc) isGrid() bool { return s.grid != nil }

// gridDim is one dimension of a grid, in canonical dimension order.
type gridDim struct {
	name   string
	values []string
	at     pos
	valAt  []pos
}

// testDoc is one entry of tests.
type testDoc struct {
	at         pos
	index      int
	test       string
	iterations int // 0: the plan's
	warmup     *bool
	timeout    time.Duration // 0: the plan's
	timeoutAt  scalarAt      // where timeout is set
	protocols  []string      // nil: the plan's
	clients    []string      // nil: the plan's
	servers    []string      // nil: the plan's
	scenarios  []string      // nil: every scenario
	scenAt     []pos
	params     []paramVals // as written, in the test's canonical parameter order
}

// scalarAt is a scalar of the plan text as written and where it is.
type scalarAt struct {
	at   pos
	text string
}

type paramVals struct {
	name   string
	values []string // canonical texts
	at     pos
}

// gridDims are the grid dimensions in canonical order, with the link spec
// keyword each one maps to.
var gridDims = []struct{ name, keyword string }{
	{"rate", "rate"}, {"delay", "delay"}, {"jitter", "delay"}, {"loss", "loss"},
	{"limit", "limit"}, {"reorder", "reorder"}, {"duplicate", "duplicate"}, {"corrupt", "corrupt"},
}

func gridDimNames() []string {
	var s []string
	for _, g := range gridDims {
		s = append(s, g.name)
	}
	return s
}

var (
	topKeys   = []string{"name", "description", "seed", "iterations", "precision", "max_iterations", "min_effect", "parallel", "pin", "capture", "capture_snap", "capture_limit", "warmup", "protocols", "client", "server", "cc", "timeout", "browser_restart", "browser_memory_limit", "browser_files_limit", "stacks", "missing_bodies", "scenarios", "tests"}
	namedKeys = []string{"name", "link", "up", "down", "trace", "competing"}
	gridKeys  = []string{"name", "grid", "direction", "base", "competing"}
	testKeys  = []string{"test", "iterations", "warmup", "protocols", "client", "server", "timeout", "scenarios", "params"}
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)
	yamlLine  = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

type decoder struct {
	file     string
	baseDir  string // "" = do not resolve or check paths
	errs     ErrorList
	resolved bool     // a relative path was made absolute
	missing  string   // the plan's missing_bodies, for checking HAR sites
	harNotes []string // what the HAR sites hold (doc.harNotes)
	harSeen  map[string]bool
}

func (d *decoder) fail(n *yaml.Node, path, msg string) {
	e := &Error{File: d.file, Path: path, Msg: msg}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
		if n.Kind == yaml.ScalarNode {
			e.Value = n.Value
		}
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) failAt(at pos, path, value, msg string) {
	d.errs = append(d.errs, &Error{File: d.file, Line: at.line, Col: at.col, Path: path, Value: value, Msg: msg})
}

func at(n *yaml.Node) pos { return pos{n.Line, n.Column} }

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "empty"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		}
		return "a string"
	}
	return "an unexpected node"
}

type field struct {
	key, val *yaml.Node
}

// mapping returns the fields of a mapping node keyed by name, rejecting
// unknown and duplicate keys.
func (d *decoder) mapping(n *yaml.Node, path string, allowed []string) (map[string]field, bool) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, fmt.Sprintf("expected a mapping with keys %s, got %s", strings.Join(allowed, ", "), kindName(n)))
		return nil, false
	}
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be plain names")
			continue
		}
		known := false
		for _, a := range allowed {
			if k.Value == a {
				known = true
			}
		}
		if !known {
			e := &Error{File: d.file, Line: k.Line, Col: k.Column, Path: path,
				Msg: fmt.Sprintf("unknown key %q%s (allowed: %s)", k.Value, suggest(k.Value, allowed), strings.Join(allowed, ", "))}
			if k.Value == "<<" {
				e.Msg = "merge keys (<<) are not supported; repeat the fields (allowed: " + strings.Join(allowed, ", ") + ")"
			}
			d.errs = append(d.errs, e)
			continue
		}
		if _, dup := out[k.Value]; dup {
			d.failAt(at(k), join(path, k.Value), "", "duplicate key")
			continue
		}
		out[k.Value] = field{k, v}
	}
	return out, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// str returns a string scalar's value.
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.fail(n, path, "expected a string, got "+kindName(n))
		return "", false
	}
	return n.Value, true
}

// percent reads a precision target such as 5% (more than 0, at most 100).
func (d *decoder) percent(n *yaml.Node, path string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.fail(n, path, "expected a percentage such as 5%, got "+kindName(n))
		return 0, false
	}
	num, ok := strings.CutSuffix(strings.TrimSpace(n.Value), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || !(v > 0 && v <= 100) {
		d.fail(n, path, "expected a percentage such as 5% (more than 0%, at most 100%)")
		return 0, false
	}
	return v, true
}

// effect reads a smallest effect of interest such as 5% (at least 0%, which
// turns the rule off, and below 100%).
func (d *decoder) effect(n *yaml.Node, path string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.fail(n, path, "expected a percentage such as 5%, got "+kindName(n))
		return 0, false
	}
	num, ok := strings.CutSuffix(strings.TrimSpace(n.Value), "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || !(v >= 0 && v < 100) {
		d.fail(n, path, "expected a percentage such as 5% (at least 0%, which turns the rule off, and below 100%)")
		return 0, false
	}
	return v, true
}

func (d *decoder) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.fail(n, path, fmt.Sprintf("expected an integer (allowed: %d..%d), got %s", lo, hi, kindName(n)))
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil || v < lo || v > hi {
		d.fail(n, path, fmt.Sprintf("out of range (allowed: %d..%d)", lo, hi))
		return 0, false
	}
	return v, true
}

func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		d.fail(n, path, "expected true or false, got "+kindName(n))
		return false, false
	}
	var b bool
	if err := n.Decode(&b); err != nil {
		d.fail(n, path, "expected true or false")
		return false, false
	}
	return b, true
}

func (d *decoder) duration(n *yaml.Node, path string, lo, hi time.Duration) (time.Duration, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.fail(n, path, "expected a duration such as 30s, got "+kindName(n))
		return 0, false
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		d.fail(n, path, err.Error())
		return 0, false
	}
	if v < lo || v > hi {
		d.fail(n, path, fmt.Sprintf("out of range (allowed: %s..%s)", formatDuration(lo), formatDuration(hi)))
		return 0, false
	}
	return v, true
}

// list returns the items of a list node, or the node itself when it is a
// single scalar (so "protocols: h3" means "protocols: [h3]").
func (d *decoder) list(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
		return []*yaml.Node{n}, true
	}
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, "expected a value or a list of values, got "+kindName(n))
		return nil, false
	}
	if len(n.Content) == 0 {
		d.fail(n, path, "empty list (give at least one value)")
		return nil, false
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out, true
}

// choices decodes a value or list of values, each from allowed, no duplicates.
func (d *decoder) choices(n *yaml.Node, path string, allowed []string) ([]string, bool) {
	items, ok := d.list(n, path)
	if !ok {
		return nil, false
	}
	var out []string
	seen := map[string]bool{}
	good := true
	for i, it := range items {
		p := path
		if n.Kind == yaml.SequenceNode {
			p = fmt.Sprintf("%s[%d]", path, i)
		}
		if it.Kind != yaml.ScalarNode {
			d.fail(it, p, "expected one of "+strings.Join(allowed, ", ")+", got "+kindName(it))
			good = false
			continue
		}
		v := it.Value
		if !contains(allowed, v) {
			d.fail(it, p, fmt.Sprintf("unknown value%s (allowed: %s)", suggest(v, allowed), strings.Join(allowed, ", ")))
			good = false
			continue
		}
		if seen[v] {
			d.fail(it, p, "listed twice")
			good = false
			continue
		}
		seen[v] = true
		out = append(out, v)
	}
	return out, good
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// decode parses the YAML text and validates every field on its own.
func (d *decoder) decode(data []byte) (*doc, bool) {
	var root yaml.Node
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			d.errs = append(d.errs, &Error{File: d.file, Msg: "empty plan (a plan needs at least scenarios and tests)"})
			return nil, false
		}
		d.syntax(err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.syntax(err)
		} else {
			d.errs = append(d.errs, &Error{File: d.file, Line: extra.Line, Col: extra.Column, Msg: "a second YAML document: a plan file holds one document"})
		}
		return nil, false
	}
	top := &root
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	top = resolve(top)
	if top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		d.errs = append(d.errs, &Error{File: d.file, Msg: "empty plan (a plan needs at least scenarios and tests)"})
		return nil, false
	}
	f, ok := d.mapping(top, "", topKeys)
	if !ok {
		return nil, false
	}
	out := &doc{seed: DefaultSeed, iterations: DefaultIterations, warmup: true, timeout: DefaultTimeout,
		protocols: []string{model.ProtoH1, model.ProtoH2, model.ProtoH3}, clients: []string{DefaultClient}, servers: []string{model.ServerQuicbench}, ccs: []string{DefaultCC}}
	if v, ok := f["name"]; ok {
		if s, ok := d.str(v.val, "name"); ok {
			switch {
			case strings.TrimSpace(s) == "":
				d.fail(v.val, "name", "empty name")
			case strings.ContainsAny(s, "\n\r") || len(s) > 100:
				d.fail(v.val, "name", "a name is one line of at most 100 characters")
			default:
				out.name = s
			}
		}
	}
	if v, ok := f["description"]; ok {
		if s, ok := d.str(v.val, "description"); ok {
			out.description = strings.TrimSpace(s)
		}
	}
	if v, ok := f["seed"]; ok {
		n := v.val
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.fail(n, "seed", "expected a non-negative integer, got "+kindName(n))
		} else if s, err := strconv.ParseUint(n.Value, 0, 64); err != nil {
			d.fail(n, "seed", "out of range (allowed: 0..18446744073709551615)")
		} else {
			out.seed = s
		}
	}
	if v, ok := f["iterations"]; ok {
		if n, ok := d.integer(v.val, "iterations", 1, MaxIterations); ok {
			out.iterations = int(n)
		}
	}
	if v, ok := f["precision"]; ok {
		if pct, ok := d.percent(v.val, "precision"); ok {
			out.precision = pct
		}
	}
	if v, ok := f["min_effect"]; ok {
		if pct, ok := d.effect(v.val, "min_effect"); ok {
			out.minEffect, out.minEffectSet = pct, true
		}
	}
	if v, ok := f["max_iterations"]; ok {
		if _, set := f["precision"]; !set {
			d.fail(v.val, "max_iterations", "only with precision (adaptive iterations): a fixed design runs its iterations")
		} else if n, ok := d.integer(v.val, "max_iterations", 2, MaxIterations); ok {
			out.maxIterations, out.maxIterAt = int(n), at(v.val)
		}
	}
	if v, ok := f["parallel"]; ok {
		if n, ok := d.integer(v.val, "parallel", 1, MaxParallelSetting); ok {
			out.parallel = int(n)
		}
	}
	if v, ok := f["pin"]; ok {
		if b, ok := d.boolean(v.val, "pin"); ok {
			out.pin = b
			if b && out.parallel > 1 {
				d.fail(v.val, "pin", "pin: true runs one testbed at a time (a machine's CPUs cannot be given to the emulator, server and client of several testbeds at once); remove parallel or pin")
			}
		}
	}
	d.captureFields(f, out)
	if v, ok := f["warmup"]; ok {
		if b, ok := d.boolean(v.val, "warmup"); ok {
			out.warmup = b
		}
	}
	d.browserFields(f, out)
	if v, ok := f["timeout"]; ok {
		if t, ok := d.duration(v.val, "timeout", time.Second, 24*time.Hour); ok {
			out.timeout = t
			out.timeoutAt = scalarAt{at(v.val), v.val.Value}
		}
	}
	if v, ok := f["protocols"]; ok {
		out.protoPos = at(v.val)
		if s, ok := d.choices(v.val, "protocols", model.Protocols); ok {
			out.protocols = s
		}
	}
	if v, ok := f["stacks"]; ok {
		out.stacks = d.stacks(v.val)
	}
	if v, ok := f["client"]; ok {
		out.clientPos = at(v.val)
		if s, ok := d.choices(v.val, "client", peers.Clients()); ok {
			out.clients = s
		}
	}
	if v, ok := f["server"]; ok {
		if s, ok := d.choices(v.val, "server", peers.Servers()); ok {
			out.servers = s
		}
	}
	if v, ok := f["cc"]; ok {
		if s, ok := d.choices(v.val, "cc", model.CongestionControls); ok {
			out.ccs = s
		}
	}
	if v, ok := f["missing_bodies"]; ok {
		if c, ok := d.choices(v.val, "missing_bodies", MissingPolicies); ok {
			if len(c) != 1 {
				d.fail(v.val, "missing_bodies", "one value: refuse or fill")
			} else {
				out.missingBodies = c[0]
			}
		}
	}
	d.missing = out.missingBodies
	if v, ok := f["scenarios"]; ok {
		d.scenarios(v.val, out)
	} else {
		d.errs = append(d.errs, &Error{File: d.file, Line: top.Line, Col: top.Column, Path: "scenarios", Msg: "missing (a plan needs at least one scenario, e.g. - name: baseline)"})
	}
	if v, ok := f["tests"]; ok {
		d.tests(v.val, out)
	} else {
		d.errs = append(d.errs, &Error{File: d.file, Line: top.Line, Col: top.Column, Path: "tests", Msg: "missing (a plan needs at least one test, e.g. - test: ttfb)"})
	}
	out.resolved = d.resolved
	out.harNotes = d.harNotes
	return out, len(d.errs) == 0
}

func (d *decoder) syntax(err error) {
	msg := err.Error()
	e := &Error{File: d.file, Msg: "YAML syntax: " + strings.TrimPrefix(msg, "yaml: ")}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = "YAML syntax: " + m[2]
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) seq(n *yaml.Node, path, what string) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, path, fmt.Sprintf("expected a list of %s, got %s", what, kindName(n)))
		return nil
	}
	if len(n.Content) == 0 {
		d.fail(n, path, fmt.Sprintf("empty list: the plan would have zero cells (give at least one of %s)", what))
		return nil
	}
	out := make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		out[i] = resolve(c)
	}
	return out
}

func (d *decoder) scenarios(n *yaml.Node, out *doc) {
	for i, it := range d.seq(n, "scenarios", "scenarios") {
		path := fmt.Sprintf("scenarios[%d]", i)
		s := scenDoc{at: at(it), index: i}
		keys, isGrid := namedKeys, false
		if it.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(it.Content); j += 2 {
				if k := resolve(it.Content[j]); k.Kind == yaml.ScalarNode && (k.Value == "grid" || k.Value == "base" || k.Value == "direction") {
					keys, isGrid = gridKeys, true
				}
			}
		}
		f, ok := d.mapping(it, path, keys)
		if !ok {
			continue
		}
		if v, ok := f["name"]; ok {
			if nm, ok := d.str(v.val, path+".name"); ok {
				if !nameRE.MatchString(nm) || len(nm) > 64 {
					d.fail(v.val, path+".name", "a scenario name is 1-64 letters, digits and . _ + - (starting with a letter or digit)")
				} else {
					s.name = nm
				}
			}
		} else if !isGrid {
			d.fail(it, path, "missing name (every scenario that is not a grid needs one)")
		}
		if isGrid {
			d.grid(f, path, &s)
		} else {
			d.named(f, path, &s)
		}
		d.competing(f, path, &s) // competing traffic (plan/competing.go)
		out.scenarios = append(out.scenarios, s)
	}
}

func (d *decoder) linkField(f map[string]field, key, path string) (*string, pos) {
	v, ok := f[key]
	if !ok {
		return nil, pos{}
	}
	n := v.val
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		empty := ""
		return &empty, at(n)
	}
	s, ok := d.str(n, join(path, key))
	if !ok {
		return nil, pos{}
	}
	return &s, d.valuePos(n)
}

// valuePos is where the text of a scalar starts (after an opening quote).
func (d *decoder) valuePos(n *yaml.Node) pos {
	p := at(n)
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		p.col++
	}
	return p
}

func (d *decoder) named(f map[string]field, path string, s *scenDoc) {
	s.link, s.linkPos = d.linkField(f, "link", path)
	s.up, s.upPos = d.linkField(f, "up", path)
	s.down, s.dnP = d.linkField(f, "down", path)
	if s.link != nil && (s.up != nil || s.down != nil) {
		k := f["up"].key
		if k == nil {
			k = f["down"].key
		}
		d.failAt(at(k), path, "", "link and up/down are exclusive: link sets both directions the same, up and down set one each")
	}
	if v, ok := f["trace"]; ok {
		n := v.val
		tp := path + ".trace"
		switch n.Kind {
		case yaml.ScalarNode:
			if t, ok := d.str(n, tp); ok {
				if p, ok := d.path(n, tp, t, "trace file prefix"); ok {
					s.traceUp, s.traceDown = p+".up", p+".down"
					d.checkFile(n, tp, s.traceUp)
					d.checkFile(n, tp, s.traceDown)
				}
			}
		case yaml.MappingNode:
			tf, ok := d.mapping(n, tp, []string{"up", "down"})
			if !ok {
				break
			}
			for _, dir := range []string{"up", "down"} {
				if v, ok := tf[dir]; ok {
					if t, ok := d.str(v.val, tp+"."+dir); ok {
						if p, ok := d.path(v.val, tp+"."+dir, t, "trace file"); ok {
							d.checkFile(v.val, tp+"."+dir, p)
							if dir == "up" {
								s.traceUp = p
							} else {
								s.traceDown = p
							}
						}
					}
				}
			}
			if len(tf) == 0 {
				d.fail(n, tp, "empty trace mapping (allowed: up, down)")
			}
		default:
			d.fail(n, tp, "expected a trace file prefix (PREFIX.up and PREFIX.down) or a mapping with up and down, got "+kindName(n))
		}
	}
}

// path checks a file or directory path and resolves it against the plan's
// directory when the plan was loaded from a file.
func (d *decoder) path(n *yaml.Node, p, v, what string) (string, bool) {
	if strings.TrimSpace(v) == "" || strings.ContainsAny(v, "\x00\r\n") {
		d.fail(n, p, what+" must be a non-empty path on one line")
		return "", false
	}
	if d.baseDir != "" && !filepath.IsAbs(v) {
		d.resolved = true
		return filepath.Join(d.baseDir, v), true
	}
	return v, true
}

func (d *decoder) checkFile(n *yaml.Node, p, file string) {
	if d.baseDir == "" {
		return
	}
	st, err := os.Stat(file)
	if err != nil {
		d.fail(n, p, fmt.Sprintf("cannot read %s: %v", file, errors.Unwrap(err)))
	} else if st.IsDir() {
		d.fail(n, p, file+" is a directory, not a trace file")
	}
}

func (d *decoder) grid(f map[string]field, path string, s *scenDoc) {
	s.direction = "both"
	if v, ok := f["direction"]; ok {
		if dir, ok := d.str(v.val, path+".direction"); ok {
			if !contains([]string{"both", "up", "down"}, dir) {
				d.fail(v.val, path+".direction", "unknown direction (allowed: both, down, up)")
			} else {
				s.direction = dir
			}
		}
	}
	if v, ok := f["base"]; ok {
		if v.val.Kind == yaml.ScalarNode && v.val.ShortTag() == "!!null" {
			s.basePos = at(v.val)
		} else if b, ok := d.str(v.val, path+".base"); ok {
			s.base, s.basePos = b, d.valuePos(v.val)
		}
	}
	v, ok := f["grid"]
	if !ok {
		k := f["base"].key
		if k == nil {
			k = f["direction"].key
		}
		d.fail(k, path, "base and direction belong to a grid, but grid is missing (or use link/up/down for a named scenario)")
		return
	}
	s.gridPos = at(v.key)
	gp := path + ".grid"
	gf, ok := d.mapping(v.val, gp, gridDimNames())
	if !ok {
		return
	}
	if len(gf) == 0 {
		d.fail(v.val, gp, "empty grid: it would expand to zero scenarios (give at least one of "+strings.Join(gridDimNames(), ", ")+")")
		return
	}
	s.grid = []gridDim{}
	for _, g := range gridDims {
		fv, ok := gf[g.name]
		if !ok {
			continue
		}
		dp := gp + "." + g.name
		dim := gridDim{name: g.name, at: at(fv.key)}
		var items []*yaml.Node
		if fv.val.Kind == yaml.SequenceNode && len(fv.val.Content) == 0 {
			d.fail(fv.val, dp, "empty list: the grid would expand to zero scenarios (give at least one value)")
			continue
		}
		items, ok = d.list(fv.val, dp)
		if !ok {
			continue
		}
		seen := map[string]bool{}
		for i, it := range items {
			ip := dp
			if fv.val.Kind == yaml.SequenceNode {
				ip = fmt.Sprintf("%s[%d]", dp, i)
			}
			if it.Kind != yaml.ScalarNode || it.ShortTag() == "!!null" {
				d.fail(it, ip, "expected a value such as "+gridExample(g.name)+", got "+kindName(it))
				continue
			}
			val := strings.TrimSpace(it.Value)
			if val == "" || strings.ContainsAny(val, " \t,=/") {
				d.fail(it, ip, "a grid value is one token such as "+gridExample(g.name))
				continue
			}
			if seen[val] {
				d.fail(it, ip, "listed twice")
				continue
			}
			seen[val] = true
			dim.values = append(dim.values, val)
			dim.valAt = append(dim.valAt, d.valuePos(it))
		}
		if len(dim.values) == len(items) {
			s.grid = append(s.grid, dim)
		}
	}
}

func gridExample(dim string) string {
	switch dim {
	case "rate":
		return "10mbit"
	case "delay", "jitter":
		return "25ms"
	case "limit":
		return "1000"
	}
	return "2%"
}

func (d *decoder) tests(n *yaml.Node, out *doc) {
	for i, it := range d.seq(n, "tests", "tests") {
		path := fmt.Sprintf("tests[%d]", i)
		f, ok := d.mapping(it, path, testKeys)
		if !ok {
			continue
		}
		t := testDoc{at: at(it), index: i}
		tv, ok := f["test"]
		if !ok {
			d.fail(it, path, "missing test (allowed: "+strings.Join(testNames(), ", ")+")")
			continue
		}
		name, ok := d.str(tv.val, path+".test")
		if !ok {
			continue
		}
		def := lookupTest(name)
		if def == nil {
			d.fail(tv.val, path+".test", fmt.Sprintf("unknown test%s (allowed: %s)", suggest(name, testNames()), strings.Join(testNames(), ", ")))
			continue
		}
		t.test = name
		if v, ok := f["iterations"]; ok {
			if n, ok := d.integer(v.val, path+".iterations", 1, MaxIterations); ok {
				t.iterations = int(n)
			}
		}
		if v, ok := f["warmup"]; ok {
			if b, ok := d.boolean(v.val, path+".warmup"); ok {
				t.warmup = &b
			}
		}
		if v, ok := f["timeout"]; ok {
			if tt, ok := d.duration(v.val, path+".timeout", time.Second, 24*time.Hour); ok {
				t.timeout = tt
				t.timeoutAt = scalarAt{at(v.val), v.val.Value}
			}
		}
		if v, ok := f["protocols"]; ok {
			if s, ok := d.choices(v.val, path+".protocols", model.Protocols); ok {
				t.protocols = s
				for j, p := range s {
					if why := protoUnsupported(def, p); why != "" {
						d.failAt(d.itemPos(v.val, j), d.itemPath(v.val, path+".protocols", j), p, why+"; remove it from this test's protocols")
					}
				}
			}
		}
		if v, ok := f["client"]; ok {
			if s, ok := d.choices(v.val, path+".client", peers.Clients()); ok {
				t.clients = s
				for j, c := range s {
					if why := clientUnsupported(def, c); why != "" {
						d.failAt(d.itemPos(v.val, j), d.itemPath(v.val, path+".client", j), c, why)
					}
				}
				for j, p := range t.protocols {
					for _, c := range t.clients {
						if why := clientProtoUnsupported(p, c); why != "" {
							pv := f["protocols"].val
							d.failAt(d.itemPos(pv, j), d.itemPath(pv, path+".protocols", j), p, why)
							break
						}
					}
				}
			}
		}
		if v, ok := f["server"]; ok {
			if s, ok := d.choices(v.val, path+".server", peers.Servers()); ok {
				t.servers = s
				for j, srv := range s {
					if why := serverUnsupported(def, srv); why != "" {
						d.failAt(d.itemPos(v.val, j), d.itemPath(v.val, path+".server", j), srv, why)
					}
				}
			}
		}
		if v, ok := f["scenarios"]; ok {
			items, ok := d.list(v.val, path+".scenarios")
			if ok {
				for j, s := range items {
					sp := d.itemPath(v.val, path+".scenarios", j)
					if name, ok := d.str(s, sp); ok {
						if contains(t.scenarios, name) {
							d.fail(s, sp, "listed twice")
							continue
						}
						t.scenarios = append(t.scenarios, name)
						t.scenAt = append(t.scenAt, at(s))
					}
				}
			}
		}
		if v, ok := f["params"]; ok {
			t.params = d.params(v.val, path+".params", def)
		}
		out.tests = append(out.tests, t)
	}
}

func (d *decoder) itemPos(n *yaml.Node, i int) pos {
	if n.Kind == yaml.SequenceNode && i < len(n.Content) {
		return at(n.Content[i])
	}
	return at(n)
}

func (d *decoder) itemPath(n *yaml.Node, path string, i int) string {
	if n.Kind == yaml.SequenceNode {
		return fmt.Sprintf("%s[%d]", path, i)
	}
	return path
}

func (d *decoder) params(n *yaml.Node, path string, def *testDef) []paramVals {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	f, ok := d.mapping(n, path, def.paramNames())
	if !ok {
		return nil
	}
	var out []paramVals
	for _, pd := range def.params {
		v, ok := f[pd.name]
		if !ok {
			continue
		}
		pp := path + "." + pd.name
		if v.val.Kind == yaml.SequenceNode && len(v.val.Content) == 0 {
			d.fail(v.val, pp, "empty list: the test would expand to zero cells (give at least one value)")
			continue
		}
		items, ok := d.list(v.val, pp)
		if !ok {
			continue
		}
		pv := paramVals{name: pd.name, at: at(v.key)}
		seen := map[string]bool{}
		good := true
		for i, it := range items {
			ip := d.itemPath(v.val, pp, i)
			if it.Kind != yaml.ScalarNode || it.ShortTag() == "!!null" {
				d.fail(it, ip, fmt.Sprintf("expected %s (allowed: %s), got %s", kindWord(pd.kind), pd.allowed(), kindName(it)))
				good = false
				continue
			}
			canon, msg := pd.parseValue(it.Value, it.ShortTag() == "!!int")
			if msg != "" {
				d.fail(it, ip, fmt.Sprintf("%s (allowed: %s)", msg, pd.allowed()))
				good = false
				continue
			}
			if pd.kind == kindSite && IsHARSite(canon) {
				if !d.harSite(it, ip, &canon) {
					good = false
					continue
				}
			} else if pd.kind == kindSite && !contains(GeneratedSites, canon) {
				if p, ok := d.path(it, ip, canon, "a site directory"); ok {
					canon = p
					if d.baseDir != "" {
						if st, err := os.Stat(p); err != nil || !st.IsDir() {
							d.fail(it, ip, fmt.Sprintf("site directory %s does not exist (allowed: %s)", p, pd.allowed()))
							good = false
							continue
						}
					}
				}
			}
			if seen[canon] {
				d.fail(it, ip, fmt.Sprintf("listed twice (as %s)", canon))
				good = false
				continue
			}
			seen[canon] = true
			pv.values = append(pv.values, canon)
		}
		if good {
			out = append(out, pv)
		}
	}
	return out
}

func kindWord(k paramKind) string {
	switch k {
	case kindInt:
		return "an integer"
	case kindSize:
		return "a size such as 1MB"
	case kindDuration:
		return "a duration such as 50ms"
	}
	return "a string"
}

// harSite resolves and checks a HAR site (a built-in page or a file):
// the file must exist and be a HAR with a page to replay, and entries
// without a body need missing_bodies: fill. Its summary becomes a note.
func (d *decoder) harSite(n *yaml.Node, path string, site *string) bool {
	if !isHARPath(*site) {
		return d.harNote(n, path, *site)
	}
	p, ok := d.path(n, path, *site, "a HAR file")
	if !ok {
		return false
	}
	*site = p
	if d.baseDir == "" {
		return true
	}
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		d.fail(n, path, fmt.Sprintf("HAR file %s does not exist (allowed: %s)", p, (&paramDef{kind: kindSite}).allowed()))
		return false
	}
	return d.harNote(n, path, p)
}

// harNote summarises a HAR site once, checking its missing bodies.
func (d *decoder) harNote(n *yaml.Node, path, site string) bool {
	if d.harSeen[site] {
		return true
	}
	if d.harSeen == nil {
		d.harSeen = map[string]bool{}
	}
	d.harSeen[site] = true
	s, err := HARSummary(site)
	if err != nil {
		d.fail(n, path, err.Error())
		return false
	}
	problem, note := harCheck(site, s, d.missing)
	if problem != "" {
		d.fail(n, path, problem)
		return false
	}
	d.harNotes = append(d.harNotes, note)
	return true
}

// stackKeys are the fields of a contract stack's declaration.
var stackKeys = []string{"name", "command", "roles", "protocols"}

// stacks decodes the plan's contract stacks (docs/plan-format.md, "Stacks
// of your own"): a list of declarations, or the path of a YAML file that
// holds one (relative to the plan's directory). Each is checked
// (peers.Contract: its command an executable file, relative to the file
// that declares it) and declared in the registry, so that client: and
// server: may name it. Declaring runs nothing: the runner runs a contract
// stack's command only when the user allows it.
func (d *decoder) stacks(n *yaml.Node) []*peers.Stack {
	dir, origin := d.baseDir, d.file
	list := n
	if n.Kind == yaml.ScalarNode {
		path, ok := d.path(n, "stacks", n.Value, "stacks")
		if !ok {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			d.fail(n, "stacks", fmt.Sprintf("the file of stacks: %v", err))
			return nil
		}
		var file yaml.Node
		if err := yaml.Unmarshal(b, &file); err != nil || len(file.Content) == 0 {
			d.fail(n, "stacks", fmt.Sprintf("%s: not a YAML list of stacks: %v", path, err))
			return nil
		}
		list, dir, origin = file.Content[0], filepath.Dir(path), path
	}
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if list.Kind != yaml.SequenceNode {
		d.fail(list, "stacks", "expected a list of stacks (name, command, roles, protocols) or the path of a file holding one, got "+kindName(list))
		return nil
	}
	var out []*peers.Stack
	for i, item := range list.Content {
		path := fmt.Sprintf("stacks[%d]", i)
		f, ok := d.mapping(item, path, stackKeys)
		if !ok {
			continue
		}
		var decl peers.ContractDecl
		for _, k := range []string{"name", "command"} {
			v, ok := f[k]
			if !ok {
				d.fail(item, path, "missing "+k)
				continue
			}
			if s, ok := d.str(v.val, path+"."+k); ok {
				if k == "name" {
					decl.Name = s
				} else {
					decl.Command = s
				}
			}
		}
		if v, ok := f["roles"]; ok {
			decl.Roles, _ = d.choices(v.val, path+".roles", []string{peers.RoleServer, peers.RoleClient})
		} else {
			d.fail(item, path, "missing roles: [server], [client] or both")
		}
		if v, ok := f["protocols"]; ok {
			decl.Protocols, _ = d.choices(v.val, path+".protocols", []string{model.ProtoH3, model.ProtoQUIC})
		}
		if decl.Name == "" || decl.Command == "" || len(decl.Roles) == 0 {
			continue
		}
		st, err := peers.Contract(decl, dir, origin)
		if err == nil {
			err = peers.Declare(st)
		}
		if err != nil {
			d.fail(item, path, err.Error())
			continue
		}
		if d.baseDir != "" || n.Kind == yaml.ScalarNode {
			d.resolved = d.resolved || st.Command != decl.Command
		}
		out = append(out, st)
	}
	return out
}

// LoadStacks reads a file of contract stacks (a YAML list of name,
// command, roles and protocols: what a plan's stacks: holds), declares
// them in the registry and returns them: `quicbench run --stacks FILE`,
// the user naming the file whose commands a run may execute.
func LoadStacks(path string) ([]*peers.Stack, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	d := &decoder{file: path, baseDir: filepath.Dir(abs)}
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: abs, Line: 1, Column: 1}
	stacks := d.stacks(n)
	if len(d.errs) > 0 {
		return nil, d.errs.sorted()
	}
	if len(stacks) == 0 {
		return nil, fmt.Errorf("%s: no stacks", path)
	}
	return stacks, nil
}

// WithStacks returns the plan with contract stacks added to those it
// declares (in its hash and its canonical text, so that a stored run says
// what it ran); a name it declares already is an error.
func (p *Plan) WithStacks(stacks []*peers.Stack) (*Plan, error) {
	q := *p
	q.d.stacks = slices.Clone(p.d.stacks)
	for _, st := range stacks {
		if slices.ContainsFunc(q.d.stacks, func(o *peers.Stack) bool { return o.Name == st.Name }) {
			return nil, fmt.Errorf("stack %s is declared by the plan too", st.Name)
		}
		q.d.stacks = append(q.d.stacks, st)
	}
	q.source = nil
	return &q, nil
}
