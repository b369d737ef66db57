// Package addrpattern parses and matches client-address patterns: the one
// syntax client classes, what-if rules and search share.
//
//	[IP.SRC] (== | !=) PATTERN    or a bare PATTERN (meaning ==)
//
// PATTERN is a CIDR prefix (v4 or v6, an IPv4-mapped ::ffff:a.b.c.d/n
// counting as IPv4), a single address, the RLM wildcard form of four IPv4
// octets in which any octet may be "*" ("10.4.*.*", "10.*.3.*",
// "*.*.*.*"), or "*" alone for every address of either family. IPv4 forms
// match IPv4 clients (IPv4-mapped IPv6 ones too), IPv6 forms IPv6 clients.
// Every form compiles to a family, a 128-bit mask and a value, so matching
// is two word compares and allocates nothing. "!=" is the exact complement
// of "==": an IPv4 pattern negated matches every IPv6 client too.
//
//	p, err := addrpattern.Parse("IP.SRC != 10.4.*.*")
//	p.Match(netip.MustParseAddr("10.4.3.9")) // false
//	p.Match(netip.MustParseAddr("10.5.0.1")) // true
package addrpattern

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Pattern is one compiled pattern; the zero value matches nothing.
type Pattern struct {
	neg  bool
	any  bool // "*": both families
	v6   bool
	mask [2]uint64
	val  [2]uint64
	text string
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.text }

// Negated reports whether the pattern was written with "!=".
func (p Pattern) Negated() bool { return p.neg }

// Negate returns the complement.
func (p Pattern) Negate() Pattern {
	p.neg = !p.neg
	return p
}

// Match reports whether addr satisfies the pattern. The invalid Addr
// matches no positive pattern.
func (p *Pattern) Match(addr netip.Addr) bool {
	return p.matchEq(addr) != p.neg
}

func (p *Pattern) matchEq(addr netip.Addr) bool {
	if !addr.IsValid() || p.text == "" {
		return false
	}
	if p.any {
		return true
	}
	addr = addr.Unmap()
	if addr.Is4() == p.v6 {
		return false
	}
	b := addr.As16()
	hi := binary.BigEndian.Uint64(b[:8])
	lo := binary.BigEndian.Uint64(b[8:])
	return hi&p.mask[0] == p.val[0] && lo&p.mask[1] == p.val[1]
}

// Parse compiles a match expression: an optional "IP.SRC", an optional
// "==" or "!=", then the pattern.
func Parse(expr string) (Pattern, error) {
	rest := strings.TrimSpace(expr)
	if len(rest) >= 6 && strings.EqualFold(rest[:6], "ip.src") {
		rest = strings.TrimSpace(rest[6:])
		if !strings.HasPrefix(rest, "==") && !strings.HasPrefix(rest, "!=") {
			return Pattern{text: expr}, errors.New("want == or != after IP.SRC")
		}
	}
	neg := false
	switch {
	case strings.HasPrefix(rest, "=="):
		rest = strings.TrimSpace(rest[2:])
	case strings.HasPrefix(rest, "!="):
		neg = true
		rest = strings.TrimSpace(rest[2:])
	}
	p, err := ParseAddr(rest)
	p.text, p.neg = expr, neg
	return p, err
}

// ParseAddr compiles a pattern alone, without an operator (what follows
// "IP.SRC ==" in a rule).
func ParseAddr(s string) (Pattern, error) {
	p := Pattern{text: s}
	if s == "" {
		return p, errors.New("empty address pattern")
	}
	if s == "*" {
		p.any = true
		return p, nil
	}
	if strings.Contains(s, "*") {
		return p, p.wildcard(s)
	}
	var pfx netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if pfx, err = netip.ParsePrefix(s); err != nil {
			return p, fmt.Errorf("bad CIDR: %w", err)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, fmt.Errorf("want *, a.b.*.*, a CIDR prefix or an address: %w", err)
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

// Key is what a store needs to select the pattern's addresses, in the
// 16-byte form (IPv4 as ::ffff:a.b.c.d) compared byte by byte:
//   - All: every address (the pattern is "*");
//   - else addresses whose bytes under Mask equal Value; Prefix says the
//     mask is a prefix, so they are the one range [Value, Value|^Mask];
//   - IPv6: the pattern is an IPv6 one, which IPv4 addresses (the ::ffff:
//     range) never match even where the bytes would;
//   - Negated: the selection is the complement.
type Key struct {
	All, Prefix, IPv6, Negated bool
	Mask, Value                [16]byte
}

// Key returns the pattern in store form (see Key).
func (p *Pattern) Key() Key {
	k := Key{All: p.any, IPv6: p.v6, Negated: p.neg}
	binary.BigEndian.PutUint64(k.Mask[:8], p.mask[0])
	binary.BigEndian.PutUint64(k.Mask[8:], p.mask[1])
	binary.BigEndian.PutUint64(k.Value[:8], p.val[0])
	binary.BigEndian.PutUint64(k.Value[8:], p.val[1])
	hi, lo := p.mask[0], p.mask[1]
	k.Prefix = prefixMask(hi) && (hi == ^uint64(0) && prefixMask(lo) || lo == 0)
	return k
}

// prefixMask reports whether m is some ones followed by zeros.
func prefixMask(m uint64) bool {
	inv := ^m
	return inv&(inv+1) == 0
}
