package pageview

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Pattern is one client-address pattern of a class rule:
//
//	[IP.SRC] (== | !=) PATTERN    or a bare PATTERN (meaning ==)
//
// where PATTERN is a CIDR prefix (v4 or v6), a single address, the RLM
// wildcard form of four IPv4 octets in which any octet may be "*"
// ("10.4.*.*", "*.*.*.*"), or "*" alone for every address of either family.
// Every form compiles to family + mask + value so matching is two word
// compares and allocates nothing. "!=" is the exact complement of "==": an
// IPv4 pattern negated matches every IPv6 client too.
type Pattern struct {
	neg    bool
	any    bool // "*": both families
	v6     bool
	mask   [2]uint64
	val    [2]uint64
	source string
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.source }

// Match reports whether addr satisfies the pattern. IPv4-mapped IPv6
// addresses are matched as IPv4.
func (p *Pattern) Match(addr netip.Addr) bool {
	return p.matchEq(addr) != p.neg
}

func (p *Pattern) matchEq(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	if p.any {
		return true
	}
	addr = addr.Unmap()
	if addr.Is4() != !p.v6 {
		return false
	}
	b := addr.As16()
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	return hi&p.mask[0] == p.val[0] && lo&p.mask[1] == p.val[1]
}

// ParsePattern compiles one match expression (see Pattern).
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{source: s}
	rest := strings.TrimSpace(s)
	if len(rest) >= 6 && strings.EqualFold(rest[:6], "ip.src") {
		rest = strings.TrimSpace(rest[6:])
		if !strings.HasPrefix(rest, "==") && !strings.HasPrefix(rest, "!=") {
			return p, errors.New("want == or != after IP.SRC")
		}
	}
	switch {
	case strings.HasPrefix(rest, "=="):
		rest = strings.TrimSpace(rest[2:])
	case strings.HasPrefix(rest, "!="):
		p.neg = true
		rest = strings.TrimSpace(rest[2:])
	}
	if rest == "" {
		return p, errors.New("empty address pattern")
	}
	if rest == "*" {
		p.any = true
		return p, nil
	}
	if strings.Contains(rest, "*") {
		return p, p.wildcard(rest)
	}
	var pfx netip.Prefix
	if strings.Contains(rest, "/") {
		var err error
		if pfx, err = netip.ParsePrefix(rest); err != nil {
			return p, fmt.Errorf("bad CIDR: %w", err)
		}
	} else {
		a, err := netip.ParseAddr(rest)
		if err != nil {
			return p, fmt.Errorf("bad address: %w", err)
		}
		if a.Zone() != "" {
			return p, errors.New("zoned addresses cannot match captured clients")
		}
		pfx = netip.PrefixFrom(a, a.BitLen())
	}
	addr, bits := pfx.Addr(), pfx.Bits()
	if addr.Is4In6() {
		// ::ffff:a.b.c.d/n is an IPv4 prefix in disguise; clients are unmapped.
		if bits < 96 {
			return p, errors.New("IPv4-mapped prefix shorter than /96")
		}
		addr, bits = addr.Unmap(), bits-96
	}
	p.v6 = addr.Is6()
	if !p.v6 {
		bits += 96
	}
	b := addr.As16()
	for i := range 2 {
		n := min(max(bits-64*i, 0), 64)
		m := ^uint64(0)
		if n < 64 {
			m = ^(^uint64(0) >> n)
		}
		if !p.v6 && i == 0 {
			m = ^uint64(0) // the ::ffff: part As16 gives IPv4 addresses
		}
		p.mask[i] = m
		p.val[i] = binary.BigEndian.Uint64(b[8*i:8*i+8]) & m
	}
	return p, nil
}

// wildcard compiles the RLM form a.b.c.d where any octet may be "*".
func (p *Pattern) wildcard(s string) error {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return fmt.Errorf("wildcard pattern %q needs four octets", s)
	}
	var val, mask uint32
	for i, o := range parts {
		val <<= 8
		mask <<= 8
		if o == "*" {
			continue
		}
		if o == "" || len(o) > 3 || (len(o) > 1 && o[0] == '0') || strings.Trim(o, "0123456789") != "" {
			return fmt.Errorf("octet %d %q: want 0-255 or a whole-octet *", i+1, o)
		}
		n, err := strconv.Atoi(o)
		if err != nil || n > 255 {
			return fmt.Errorf("octet %d %q out of range", i+1, o)
		}
		val |= uint32(n)
		mask |= 0xff
	}
	p.mask = [2]uint64{^uint64(0), 0xffff<<32 | uint64(mask)}
	p.val = [2]uint64{0, 0xffff<<32 | uint64(val)}
	return nil
}

// Class is a client class: rules name it, records carry its name.
type Class struct {
	Name     string
	Priority string
}

// Rule is one ordered class rule.
type Rule struct {
	Class   Class
	Pattern Pattern
	Line    int // in the configuration file, for messages
}

// Classes assigns clients to classes: ordered rules, the first match wins,
// everything else falls into Default.
type Classes struct {
	Rules   []Rule
	Default Class
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
//	default: { name: default, priority: low }
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
		Name     yaml.Node `yaml:"name"`
		Priority string    `yaml:"priority"`
		Match    yaml.Node `yaml:"match"`
	} `yaml:"classes"`
	Default *struct {
		Name     string `yaml:"name"`
		Priority string `yaml:"priority"`
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
		if err := checkName(f.Default.Name); err != nil {
			return nil, fmt.Errorf("default class: %w", err)
		}
		c.Default = Class{Name: f.Default.Name, Priority: f.Default.Priority}
	}
	seen := map[string]bool{}
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
		p, err := ParsePattern(r.Match.Value)
		if err != nil {
			return nil, fmt.Errorf("line %d: class %q: bad match pattern %q: %w", line, name, r.Match.Value, err)
		}
		c.Rules = append(c.Rules, Rule{Class: Class{Name: name, Priority: r.Priority}, Pattern: p, Line: line})
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
