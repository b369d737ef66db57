package pageview

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
