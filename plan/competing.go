package plan

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/quicbench/quicbench/competing"
	"github.com/quicbench/quicbench/model"
)

// FactorCompeting is the factor under which a cell carries the competing
// traffic of its scenario (the canonical text of a traffic spec; absent
// when the scenario has none). The runner starts those flows around each
// of the cell's samples (docs/plan-format.md, "Competing traffic").
const FactorCompeting = "competing"

// competing decodes a scenario's competing field: one traffic spec as a
// string, or a list of its clauses.
func (d *decoder) competing(f map[string]field, path string, s *scenDoc) {
	v, ok := f["competing"]
	if !ok {
		return
	}
	p := path + ".competing"
	var text string
	switch v.val.Kind {
	case yaml.SequenceNode:
		var parts []string
		for i, it := range v.val.Content {
			t, ok := d.str(it, fmt.Sprintf("%s[%d]", p, i))
			if !ok {
				return
			}
			parts = append(parts, t)
		}
		text = strings.Join(parts, "; ")
	default:
		t, ok := d.str(v.val, p)
		if !ok {
			return
		}
		text = t
	}
	sp, err := competing.Parse(text)
	if err != nil {
		d.fail(v.val, p, err.Error())
		return
	}
	s.competing = sp.String()
}

// competingFactor adds the scenario entry's competing traffic, if any, to
// the factors of its scenarios.
func competingFactor(s *scenDoc, scs []Scenario) {
	if s.competing == "" {
		return
	}
	for i := range scs {
		scs[i].Competing = s.competing
		scs[i].Factors = append(scs[i].Factors, model.Factor{Name: FactorCompeting, Value: s.competing})
	}
}

// Competing returns the competing traffic of a cell (no flows when it has
// none).
func Competing(c *model.Cell) (competing.Spec, error) {
	v, ok := c.Factor(FactorCompeting)
	if !ok {
		return competing.Spec{}, nil
	}
	sp, err := competing.Parse(v)
	if err != nil {
		return sp, fmt.Errorf("cell %s: %w", c.Key, err)
	}
	return sp, nil
}
