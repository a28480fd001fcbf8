package plan

import (
	"embed"
	"fmt"
	"sort"
	"strings"
)

//go:embed builtin/*.yaml
var builtinFS embed.FS

// builtinOrder lists the built-in plans in display order: quick first, then
// the study plans in the order of the study designs (A to E), the plans
// of later issues, then the check plans of quicbench check-parallel.
var builtinOrder = []string{"quick", "degraded-networks", "page-load-grid", "image-transfer", "three-sites", "size-bandwidth-grid", "fairness", "implementations", "recorded-pages", "parallel-check", "parallel-check-browsers"}

// Info names a built-in plan and says in one line what it measures.
type Info struct {
	Name        string
	Description string
}

// BuiltinNames returns the names of the built-in plans, quick first.
func BuiltinNames() []string { return append([]string(nil), builtinOrder...) }

// Builtins returns the built-in plans' names with their one-line
// descriptions, in the order of BuiltinNames.
func Builtins() []Info {
	var out []Info
	for _, n := range builtinOrder {
		p, err := Builtin(n)
		if err != nil {
			out = append(out, Info{Name: n, Description: "invalid: " + err.Error()})
			continue
		}
		desc, _, _ := strings.Cut(p.Description, "\n")
		out = append(out, Info{Name: n, Description: desc})
	}
	return out
}

// BuiltinYAML returns the YAML text of a built-in plan, with the comments
// that explain its design: a file a user can copy, edit and run.
func BuiltinYAML(name string) ([]byte, error) {
	if !contains(builtinOrder, name) {
		return nil, unknownBuiltin(name)
	}
	return builtinFS.ReadFile("builtin/" + name + ".yaml")
}

// Builtin parses a built-in plan by name.
func Builtin(name string) (*Plan, error) {
	data, err := BuiltinYAML(name)
	if err != nil {
		return nil, err
	}
	return Parse(name+".yaml", data)
}

func unknownBuiltin(name string) error {
	names := append([]string(nil), builtinOrder...)
	sort.Strings(names)
	return fmt.Errorf("no built-in plan named %q%s (built-in plans: %s)", name, suggest(name, names), strings.Join(builtinOrder, ", "))
}
