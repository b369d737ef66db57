package pageview

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/rtmon/rtmon/addrpattern"
	"github.com/rtmon/rtmon/reconstruct"
)

// Class is a client class: rules name it, records carry its name.
type Class struct {
	Name     string
	Priority string
}

// Rule is one ordered class rule.
type Rule struct {
	Class   Class
	Pattern addrpattern.Pattern
	Line    int // in the configuration file, for messages
}

// Classes assigns clients to classes: ordered rules, the first match wins,
// everything else falls into Default.
type Classes struct {
	Rules   []Rule
	Default Class
	slos    []ClassSLO // see SLOs
}

// DefaultClass is what unmatched clients get when the configuration names
// no default.
var DefaultClass = Class{Name: "default", Priority: "low"}

// DefaultClasses puts every client in the default class.
func DefaultClasses() *Classes { return &Classes{Default: DefaultClass} }

// Classify returns the class of a client address; it does not allocate.
func (c *Classes) Classify(addr netip.Addr) (name, priority string) {
	if c == nil {
		return DefaultClass.Name, DefaultClass.Priority
	}
	for i := range c.Rules {
		if c.Rules[i].Pattern.Match(addr) {
			return c.Rules[i].Class.Name, c.Rules[i].Class.Priority
		}
	}
	return c.Default.Name, c.Default.Priority
}

// maxRules bounds a configuration; rules are scanned per transaction.
const maxRules = 10000

// LoadClasses reads a class configuration file:
//
//	classes:
//	  - name: premium
//	    priority: high
//	    match: "IP.SRC == 10.4.*.*"
//	    slo: [{kind: pageview, under: 2s, target: 95%, window: 30d}]
//	default: { name: default, priority: low }
//
// slo (on a class entry or the default, optional) lists the class's
// objectives (see SLO): kind pageview or transaction, under a duration,
// target a percentage or a ratio, window whole days or weeks (default 30d).
// Entries of one class give the same list or none.
//
// Unknown keys are errors (a typo must not silently change who is premium).
// Errors name the file and line.
func LoadClasses(path string) (*Classes, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read classes: %w", err)
	}
	c, err := ParseClasses(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

type classFile struct {
	Classes []struct {
		Name     yaml.Node  `yaml:"name"`
		Priority string     `yaml:"priority"`
		Match    yaml.Node  `yaml:"match"`
		SLO      []sloEntry `yaml:"slo"`
	} `yaml:"classes"`
	Default *struct {
		Name     yaml.Node  `yaml:"name"`
		Priority string     `yaml:"priority"`
		SLO      []sloEntry `yaml:"slo"`
	} `yaml:"default"`
}

// ParseClasses parses a class configuration (see LoadClasses). Errors about
// a rule name its line ("line 7: ...").
func ParseClasses(data []byte) (*Classes, error) {
	var f classFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse classes: %w", err)
	}
	if len(f.Classes) > maxRules {
		return nil, fmt.Errorf("%d class rules, at most %d", len(f.Classes), maxRules)
	}
	c := &Classes{Default: DefaultClass}
	if f.Default != nil {
		if err := checkName(f.Default.Name.Value); err != nil {
			return nil, fmt.Errorf("default class: %w", err)
		}
		c.Default = Class{Name: f.Default.Name.Value, Priority: f.Default.Priority}
	}
	seen := map[string]bool{}
	slos := map[string]sloList{}
	for i, r := range f.Classes {
		line := r.Match.Line
		if line == 0 {
			line = r.Name.Line
		}
		if r.Name.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: class %d: missing name", line, i+1)
		}
		name := r.Name.Value
		if err := checkName(name); err != nil {
			return nil, fmt.Errorf("line %d: class %d: %w", r.Name.Line, i+1, err)
		}
		if seen[name] {
			// Two rules for one class are legitimate (several ranges), so only
			// a different priority under the same name is an error.
			for _, prev := range c.Rules {
				if prev.Class.Name == name && prev.Class.Priority != r.Priority {
					return nil, fmt.Errorf("line %d: class %q: priority %q differs from line %d", r.Name.Line, name, r.Priority, prev.Line)
				}
			}
		}
		seen[name] = true
		if r.Match.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: class %q: match must be a pattern string", line, name)
		}
		p, err := addrpattern.Parse(r.Match.Value)
		if err != nil {
			return nil, fmt.Errorf("line %d: class %q: bad match pattern %q: %w", line, name, r.Match.Value, err)
		}
		c.Rules = append(c.Rules, Rule{Class: Class{Name: name, Priority: r.Priority}, Pattern: p, Line: line})
		if err := c.addSLOs(name, r.Name.Line, r.SLO, slos); err != nil {
			return nil, err
		}
	}
	if f.Default != nil {
		if err := c.addSLOs(c.Default.Name, f.Default.Name.Line, f.Default.SLO, slos); err != nil {
			return nil, fmt.Errorf("default class: %w", err)
		}
	}
	return c, nil
}

// checkName keeps class names short and printable: they go into every record.
func checkName(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("class name %q: want 1-64 characters", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("class name %q: control character", s)
		}
	}
	return nil
}

// Classify returns a reconstruct.Sink that stamps every connection and
// transaction with its client's class (and a transaction with the class's
// priority) and passes it on to next. The Grouper classifies what arrives
// unclassified itself; Classify is for a stage that must see the class
// before the Grouper, such as a live counter between the tracker and the
// Grouper, so that each record is still classified once.
func Classify(classes *Classes, next reconstruct.Sink) reconstruct.Sink {
	return classifier{classes, next}
}

type classifier struct {
	classes *Classes
	next    reconstruct.Sink
}

func (c classifier) Connection(x *reconstruct.Connection) {
	x.Class, _ = c.classes.Classify(x.Client)
	c.next.Connection(x)
}

func (c classifier) Transaction(x *reconstruct.Transaction) {
	x.Class, x.Priority = c.classes.Classify(x.Client)
	c.next.Transaction(x)
}
