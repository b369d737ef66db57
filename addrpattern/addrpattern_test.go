package addrpattern

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
)

// The one table of what patterns mean, for classes, rules and search alike.
var cases = []struct {
	pat   string
	match []string
	miss  []string
}{
	{"IP.SRC == 10.4.*.*", []string{"10.4.0.0", "10.4.255.1", "::ffff:10.4.3.4"}, []string{"10.5.0.1", "11.4.0.0", "2001:db8::1", ""}},
	{"ip.src==10.*.7.*", []string{"10.0.7.1", "10.200.7.255"}, []string{"10.0.8.1"}},
	{"10.*.3.*", []string{"10.9.3.9"}, []string{"10.9.4.9", "11.9.3.9"}},
	{"*.*.*.*", []string{"0.0.0.0", "198.51.100.7"}, []string{"2001:db8::1"}},
	{"*", []string{"1.2.3.4", "2001:db8::1"}, []string{""}},
	{"IP.SRC != 10.4.*.*", []string{"10.5.0.1", "2001:db8::1", ""}, []string{"10.4.1.1"}},
	{"198.51.100.0/25", []string{"198.51.100.0", "198.51.100.127"}, []string{"198.51.100.128", "198.51.101.1"}},
	{"== 198.51.100.7", []string{"198.51.100.7"}, []string{"198.51.100.8"}},
	{"198.51.100.7/32", []string{"198.51.100.7"}, []string{"198.51.100.6"}},
	{"0.0.0.0/0", []string{"1.1.1.1"}, []string{"::1"}},
	{"2001:db8:1::/48", []string{"2001:db8:1::1", "2001:db8:1:ffff::9"}, []string{"2001:db8:2::1", "10.0.0.1"}},
	{"2001:db8::/127", []string{"2001:db8::", "2001:db8::1"}, []string{"2001:db8::2"}},
	{"IP.SRC != 2001:db8::/32", []string{"2001:db9::1", "10.0.0.1"}, []string{"2001:db8::5"}},
	{"::/0", []string{"::1", "2001:db8::1"}, []string{"10.0.0.1"}},
	{"::ffff:10.0.0.0/104", []string{"10.1.2.3", "::ffff:10.9.9.9"}, []string{"11.0.0.0"}},
	{"::ffff:10.4.0.0/112", []string{"10.4.3.9"}, []string{"10.5.3.9"}},
	{"2001:db8::1", []string{"2001:db8::1"}, []string{"2001:db8::2"}},
}

var bad = []string{"", "IP.SRC", "IP.SRC 10.0.0.1", "10.4.*", "10.4.*.*.*", "10.4*.*.*", "10.4.*.256",
	"10.04.*.*", "10.-1.*.*", "1.2.3.4/33", "2001:db8::/129", "example.com", "!= ", "10.4.*.*/16", "fe80::1%eth0",
	"::ffff:10.0.0.0/64", "== == 1.2.3.4"}

func TestPatterns(t *testing.T) {
	for _, tc := range cases {
		p, err := Parse(tc.pat)
		if err != nil {
			t.Errorf("%q: %v", tc.pat, err)
			continue
		}
		for _, a := range tc.match {
			addr, _ := netip.ParseAddr(a) // "" stays the invalid Addr
			if !p.Match(addr) || !keyMatch(p.Key(), addr) {
				t.Errorf("%q should match %q (key %v)", tc.pat, a, keyMatch(p.Key(), addr))
			}
		}
		for _, a := range tc.miss {
			addr, _ := netip.ParseAddr(a)
			if p.Match(addr) || addr.IsValid() && keyMatch(p.Key(), addr) {
				t.Errorf("%q should not match %q", tc.pat, a)
			}
		}
		if p.String() != tc.pat {
			t.Errorf("String %q, want %q", p.String(), tc.pat)
		}
	}
	for _, b := range bad {
		if _, err := Parse(b); err == nil {
			t.Errorf("%q: want an error", b)
		}
	}
	// The operand alone, as rules hold it.
	p, err := ParseAddr("10.4.*.*")
	n := p.Negate()
	if err != nil || !p.Match(netip.MustParseAddr("10.4.1.1")) || n.Match(netip.MustParseAddr("10.4.1.1")) {
		t.Errorf("ParseAddr: %v", err)
	}
	if _, err := ParseAddr("== 10.4.*.*"); err == nil {
		t.Error("ParseAddr took an operator")
	}
	var zero Pattern
	if zero.Match(netip.MustParseAddr("1.2.3.4")) {
		t.Error("the zero Pattern matched")
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	p, _ := Parse("IP.SRC == 10.4.*.*")
	addr := netip.MustParseAddr("10.4.9.9")
	if n := testing.AllocsPerRun(100, func() { p.Match(addr) }); n != 0 {
		t.Errorf("%v allocations per Match", n)
	}
}

// keyMatch is the store's reading of a Key, on the 16-byte form.
func keyMatch(k Key, a netip.Addr) bool {
	b := a.Unmap().As16()
	var eq bool
	switch {
	case k.All:
		eq = true
	case k.Prefix:
		var hi [16]byte
		for i := range hi {
			hi[i] = k.Value[i] | ^k.Mask[i]
		}
		eq = bytes.Compare(b[:], k.Value[:]) >= 0 && bytes.Compare(b[:], hi[:]) <= 0
	default:
		eq = true
		for i := range b {
			eq = eq && b[i]&k.Mask[i] == k.Value[i]
		}
	}
	if k.IPv6 && a.Unmap().Is4() {
		eq = false
	}
	return eq != k.Negated
}

func FuzzParse(f *testing.F) {
	for _, c := range cases {
		f.Add(c.pat, []byte{10, 4, 1, 2})
	}
	for _, b := range bad {
		f.Add(b, []byte{})
	}
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		p, err := Parse(s)
		if err != nil {
			return
		}
		var addr netip.Addr
		switch {
		case len(raw) >= 16:
			addr = netip.AddrFrom16([16]byte(raw[:16]))
		case len(raw) >= 4:
			addr = netip.AddrFrom4([4]byte(raw[:4]))
		}
		// Negation is the exact complement, mapped addresses match as IPv4,
		// and the store's form agrees with Match.
		q := p.Negate()
		if p.Match(addr) == q.Match(addr) {
			t.Fatalf("%q and its negation agree on %v", s, addr)
		}
		if addr.Is4() && p.Match(addr) != p.Match(netip.AddrFrom16(addr.As16())) {
			t.Fatalf("%q: %v and its mapped form differ", s, addr)
		}
		if addr.IsValid() && p.Match(addr) != keyMatch(p.Key(), addr) {
			t.Fatalf("%q: Match(%v)=%v, key says %v", s, addr, p.Match(addr), keyMatch(p.Key(), addr))
		}
		// A CIDR pattern agrees with netip.Prefix.Contains.
		if pfx, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && !pfx.Addr().Is4In6() && addr.IsValid() {
			if p.Match(addr) != pfx.Contains(addr.Unmap()) && p.Match(addr) != pfx.Contains(addr) {
				t.Fatalf("%q: Match(%v)=%v, Prefix.Contains=%v", s, addr, p.Match(addr), pfx.Contains(addr))
			}
		}
	})
}
