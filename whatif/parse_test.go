package whatif

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/addrpattern"
)

func mustPat(t *testing.T, s string) addrpattern.Pattern {
	t.Helper()
	p, err := addrpattern.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The examples as written in the RLM work (SEEDS.md).
var seedExamples = []string{
	"IF IP.SRC == *.*.*.* THEN FAST SYN/ACK GAP 500ms",
	"IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN DROP SYN",
	"IF IP.SRC == *.*.*.* THEN REMOVE EMBEDS",
	"IF RT > 2s THEN REWRITE EMBEDS",
	"IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN HALT FAST SYN",
}

func TestSeedExamplesParse(t *testing.T) {
	for _, src := range seedExamples {
		if _, err := ParseRule(src); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

func TestParseAST(t *testing.T) {
	any4 := mustPat(t, "*.*.*.*")
	net104 := mustPat(t, "10.4.*.*")
	cidr := mustPat(t, "198.51.100.0/24")
	for _, tc := range []struct {
		src  string
		want Rule
	}{
		{"IF IP.SRC == *.*.*.* THEN FAST SYN/ACK GAP 500ms",
			Rule{Line: 1, Cond: &AddrCond{Pattern: any4}, Actions: []Action{{Kind: FastSYNACK, Gap: 500 * time.Millisecond}}}},
		{"if ip.src != 10.4.*.* and rt_high > 3.0s then drop syn, halt fast syn",
			Rule{Line: 1, Cond: &And{&AddrCond{Neg: true, Pattern: net104}, &RTCond{Metric: MetricHigh, Op: OpGT, Value: 3 * time.Second}},
				Actions: []Action{{Kind: DropSYN}, {Kind: HaltFastSYN}}}},
		{"IF RT > 2s THEN REWRITE EMBEDS",
			Rule{Line: 1, Cond: &RTCond{Op: OpGT, Value: 2 * time.Second}, Actions: []Action{{Kind: RewriteEmbeds, Above: 100 * 1024, Ratio: 0.25}}}},
		{"IF RT[premium] <= 250us OR RT_LOW >= 1.5s AND IP.SRC == 198.51.100.0/24 THEN FAST SYN",
			Rule{Line: 1, Cond: &Or{&RTCond{Metric: MetricClass, Class: "premium", Op: OpLE, Value: 250 * time.Microsecond},
				&And{&RTCond{Metric: MetricLow, Op: OpGE, Value: 1500 * time.Millisecond}, &AddrCond{Pattern: cidr}}},
				Actions: []Action{{Kind: FastSYN, Gap: DefaultGap}}}},
		{"IF (RT < 1s OR RT == 2s) AND CLASS != others THEN SPLICE AND REMOVE EMBEDS",
			Rule{Line: 1, Cond: &And{&Or{&RTCond{Op: OpLT, Value: time.Second}, &RTCond{Op: OpEQ, Value: 2 * time.Second}}, &ClassCond{Neg: true, Class: "others"}},
				Actions: []Action{{Kind: Splice}, {Kind: RemoveEmbeds}}}},
		{"IF RT > 1s THEN SPLICE TERMINATE TLS, DROP SYN",
			Rule{Line: 1, Cond: &RTCond{Op: OpGT, Value: time.Second}, Actions: []Action{{Kind: Splice, TerminateTLS: true}, {Kind: DropSYN}}}},
		{"IF RT != 10ms THEN REWRITE EMBEDS ABOVE 256KB RATIO 0.5",
			Rule{Line: 1, Cond: &RTCond{Op: OpNE, Value: 10 * time.Millisecond}, Actions: []Action{{Kind: RewriteEmbeds, Above: 256 * 1024, Ratio: 0.5}}}},
	} {
		got, err := ParseRule(tc.src)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q:\n got  %s\n want %s", tc.src, got, tc.want)
		}
		// The canonical form parses back to the same rule.
		again, err := ParseRule(got.String())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Errorf("%q: round trip via %q: %v", tc.src, got.String(), err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"IF THEN SPLICE", "line 1, column 4: expected " + condExpected + `, found "THEN"`},
		{"IF RT > 1s THEN SPLICE TERMINATE SSL", `line 1, column 34: expected TLS, found "SSL"`},
		{"IF RT > 3 THEN SPLICE", `line 1, column 9: expected a duration (e.g. 3.0s, 500ms, 250us), found "3"`},
		{"IF RT > 3s SPLICE", `line 1, column 12: expected AND, OR or THEN, found "SPLICE"`},
		{"IF RT > 3s THEN", "line 1, column 16: expected " + actionExpected + ", found end of line"},
		{"# c\n\nIF IP.SRC = 10.4.*.* THEN SPLICE", `line 3, column 11: expected an operator (==, !=, <, <=, >, >=), found "="`},
		{"IF IP.SRC == 10.300.*.* THEN SPLICE", `line 1, column 14: expected an address pattern (*, 10.4.*.*, CIDR or address), found "10.300.*.*"`},
		{"IF (RT > 1s THEN SPLICE", `line 1, column 13: expected AND, OR or ")", found "THEN"`},
		{"IF RT > 1s THEN FAST SYN GAP 0ms", `line 1, column 30: expected a positive duration (e.g. 500ms), found "0ms"`},
		{"IF RT > 1s THEN FAST ACK", `line 1, column 22: expected SYN or SYN/ACK, found "ACK"`},
		{"IF RT > 1s THEN SPLICE SPLICE", `line 1, column 24: expected ",", AND or end of line, found "SPLICE"`},
		{"IF RT > 1s THEN REWRITE EMBEDS RATIO 2", `line 1, column 38: expected a ratio in (0, 1], found "2"`},
		{"IF RT[] > 1s THEN SPLICE", `line 1, column 7: expected a class name, found "]"`},
		{"IF RT > 1s THEN SPLICE; x", `line 1, column 23: expected a keyword, value, operator or parenthesis, found ";"`},
		{"SPLICE", `line 1, column 1: expected IF, found "SPLICE"`},
		{"IF CLASS < x THEN SPLICE", `line 1, column 10: expected == or !=, found "<"`},
	} {
		_, err := ParseRules(tc.src)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want a ParseError", tc.src, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("%q:\n got  %s\n want %s", tc.src, err, tc.want)
		}
	}
}

func TestParseFileCommentsAndBounds(t *testing.T) {
	src := "# admission control\n" +
		"IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.0s THEN DROP SYN   # low priority pays\r\n" +
		"\n   \t\n" +
		"IF IP.SRC == * THEN FAST SYN GAP 200ms\n"
	rs, err := ParseRules(src)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Line != 2 || rs[1].Line != 5 {
		t.Fatalf("got %v", rs)
	}
	if _, err := ParseRules(strings.Repeat("IF RT > 1s THEN SPLICE\n", MaxRules+1)); err == nil {
		t.Error("more than MaxRules rules accepted")
	}
	if _, err := ParseRules(strings.Repeat("#", MaxRuleSource+1)); err == nil {
		t.Error("oversized source accepted")
	}
	if _, err := ParseRules("IF " + strings.Repeat("(", 200) + "RT > 1s" + strings.Repeat(")", 200) + " THEN SPLICE"); err == nil {
		t.Error("deep nesting accepted")
	}
}

// Rules read addresses as classes and search do (package addrpattern, whose
// table tests the patterns themselves): an IPv4-mapped prefix is IPv4.
func TestRuleAddressesAsClasses(t *testing.T) {
	r, err := ParseRule("IF IP.SRC == ::ffff:10.4.0.0/112 THEN DROP SYN")
	if err != nil {
		t.Fatal(err)
	}
	c := r.Cond.(*AddrCond)
	if !c.Match(netip.MustParseAddr("10.4.3.9")) || c.Match(netip.MustParseAddr("10.5.3.9")) {
		t.Error("a mapped prefix does not match as IPv4")
	}
}

func FuzzParseRules(f *testing.F) {
	for _, s := range seedExamples {
		f.Add(s)
	}
	f.Add("IF (RT < 1s OR RT[a] == 2s) AND CLASS != others THEN SPLICE AND REWRITE EMBEDS ABOVE 1.5MB RATIO 0.1 # x\nIF IP.SRC == 2001:db8::/32 THEN FAST SYN GAP 1us")
	f.Fuzz(func(t *testing.T, src string) {
		rs, err := ParseRules(src)
		if err != nil {
			var pe *ParseError
			if errors.As(err, &pe) && (pe.Line < 1 || pe.Col < 1) {
				t.Fatalf("bad position in %v", err)
			}
			return
		}
		// Every accepted rule prints to a form that parses back to itself.
		for _, r := range rs {
			again, err := ParseRule(r.String())
			if err != nil {
				t.Fatalf("%q re-parsing %q: %v", src, r.String(), err)
			}
			again.Line = r.Line
			if !reflect.DeepEqual(again, r) {
				t.Fatalf("%q: round trip %q changed the rule", src, r.String())
			}
		}
	})
}
