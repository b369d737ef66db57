package pageview

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParsePattern(t *testing.T) {
	for _, tc := range []struct {
		pat   string
		match []string
		miss  []string
	}{
		{"IP.SRC == 10.4.*.*", []string{"10.4.0.0", "10.4.255.1", "::ffff:10.4.3.4"}, []string{"10.5.0.1", "11.4.0.0", "2001:db8::1", ""}},
		{"ip.src==10.*.7.*", []string{"10.0.7.1", "10.200.7.255"}, []string{"10.0.8.1"}},
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
		{"2001:db8::1", []string{"2001:db8::1"}, []string{"2001:db8::2"}},
	} {
		p, err := ParsePattern(tc.pat)
		if err != nil {
			t.Errorf("%q: %v", tc.pat, err)
			continue
		}
		for _, a := range tc.match {
			addr, _ := netip.ParseAddr(a) // "" stays the invalid Addr
			if !p.Match(addr) {
				t.Errorf("%q should match %q", tc.pat, a)
			}
		}
		for _, a := range tc.miss {
			addr, _ := netip.ParseAddr(a)
			if p.Match(addr) {
				t.Errorf("%q should not match %q", tc.pat, a)
			}
		}
	}
	for _, bad := range []string{"", "IP.SRC", "IP.SRC 10.0.0.1", "10.4.*", "10.4.*.*.*", "10.4*.*.*", "10.4.*.256",
		"10.04.*.*", "10.-1.*.*", "1.2.3.4/33", "2001:db8::/129", "example.com", "!= ", "10.4.*.*/16", "fe80::1%eth0",
		"::ffff:10.0.0.0/64", "== == 1.2.3.4"} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	c, err := ParseClasses([]byte("classes:\n  - {name: a, match: '2001:db8::/32'}\n  - {name: b, match: 'IP.SRC != 10.4.*.*'}\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr("10.4.1.1")
	if n := testing.AllocsPerRun(1000, func() { c.Classify(addr) }); n != 0 {
		t.Errorf("Classify allocates %v times", n)
	}
}

const sample = `# rtmon classes
classes:
  - name: premium
    priority: high
    match: "IP.SRC == 10.4.*.*"      # RLM wildcard form
  - name: partners
    priority: high
    match: "198.51.100.0/25"
  - name: v6lab
    priority: high
    match: "2001:db8:1::/48"
  - name: others-v4
    priority: low
    match: "IP.SRC != 10.4.*.*"
default: { name: rest, priority: low }
`

func TestClassify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "classes.yaml")
	if err := os.WriteFile(path, []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadClasses(path)
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{
		"10.4.9.9":       "premium",
		"198.51.100.5":   "partners", // also != 10.4.*.*: first match wins
		"198.51.100.200": "others-v4",
		"2001:db8:1::7":  "v6lab",
		"2001:db8:2::7":  "others-v4", // negation covers the other family
		"":               "others-v4", // the invalid address is not 10.4.*.*
	} {
		a, _ := netip.ParseAddr(addr)
		if got, _ := c.Classify(a); got != want {
			t.Errorf("%q: got %s, want %s", addr, got, want)
		}
	}
	if _, prio := c.Classify(netip.MustParseAddr("10.4.0.1")); prio != "high" {
		t.Errorf("priority %q", prio)
	}
	if c.Rules[2].Line != 11 {
		t.Errorf("rule line %d, want 11", c.Rules[2].Line)
	}

	// Without a catch-all the default class applies.
	d, err := ParseClasses([]byte("classes:\n  - {name: lab, priority: high, match: 10.0.0.0/8}\ndefault: {name: rest, priority: low}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n, p := d.Classify(netip.MustParseAddr("192.0.2.1")); n != "rest" || p != "low" {
		t.Errorf("default: %s %s", n, p)
	}
	if n, p := DefaultClasses().Classify(netip.MustParseAddr("192.0.2.1")); n != "default" || p != "low" {
		t.Errorf("DefaultClasses: %s %s", n, p)
	}
	if e, err := ParseClasses(nil); err != nil || len(e.Rules) != 0 || e.Default != DefaultClass {
		t.Errorf("empty file: %v %+v", err, e)
	}
}

func TestClassErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"classes:\n  - name: a\n    match: 10.0.0.0/8\n  - name: b\n    match: \"IP.SRC == 10.4.*.300\"\n",
			`line 5: class "b": bad match pattern "IP.SRC == 10.4.*.300"`},
		{"classes:\n  - name: a\n    match: 10.0.0.0/33\n", `line 3: class "a": bad match pattern "10.0.0.0/33"`},
		{"classes:\n  - name: a\n    mtach: 10.0.0.0/8\n", "field mtach not found"},
		{"classes:\n  - match: 10.0.0.0/8\n", "line 2: class 1: missing name"},
		{"classes:\n  - name: a\n    match: [1, 2]\n", `line 3: class "a": match must be a pattern string`},
		{"classes:\n  - {name: a, priority: high, match: 10.0.0.0/8}\n  - {name: a, priority: low, match: 11.0.0.0/8}\n", "priority"},
		{"classes: [\n", "parse classes"},
	} {
		_, err := ParseClasses([]byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.yaml, err, tc.want)
		}
	}
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("classes:\n  - name: a\n    match: 10.4.*\n"), 0o644)
	if _, err := LoadClasses(path); err == nil || !strings.Contains(err.Error(), path+": line 3:") || !strings.Contains(err.Error(), `"10.4.*"`) {
		t.Errorf("LoadClasses error %v should name file, line and pattern", err)
	}
}

func FuzzParsePattern(f *testing.F) {
	for _, s := range []string{"IP.SRC == 10.4.*.*", "10.4.*.*", "*.*.*.*", "198.51.100.0/25", "!= 2001:db8::/32",
		"::ffff:10.0.0.0/104", "*", "1.2.3.4", "10.04.*.*", "ip.src!=*.1.*.2"} {
		f.Add(s, []byte{10, 4, 1, 2})
	}
	f.Fuzz(func(t *testing.T, s string, raw []byte) {
		p, err := ParsePattern(s)
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
		// Negation is the exact complement, and mapped addresses match as IPv4.
		q := p
		q.neg = !q.neg
		if p.Match(addr) == q.Match(addr) {
			t.Fatalf("%q and its negation agree on %v", s, addr)
		}
		if addr.Is4() && p.Match(addr) != p.Match(netip.AddrFrom16(addr.As16())) {
			t.Fatalf("%q: %v and its mapped form differ", s, addr)
		}
		// A matching CIDR pattern agrees with netip.Prefix.Contains.
		if pfx, err := netip.ParsePrefix(strings.TrimSpace(s)); err == nil && !pfx.Addr().Is4In6() && addr.IsValid() {
			if p.Match(addr) != pfx.Contains(addr.Unmap()) && p.Match(addr) != pfx.Contains(addr) {
				t.Fatalf("%q: Match(%v)=%v, Prefix.Contains=%v", s, addr, p.Match(addr), pfx.Contains(addr))
			}
		}
	})
}
