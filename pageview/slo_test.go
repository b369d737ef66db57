package pageview

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

const sloSample = `classes:
  - name: premium
    priority: high
    match: "10.4.0.0/16"
    slo:
      - {kind: pageview, under: 2s, target: 95%, window: 30d}
      - {kind: transaction, under: 250ms, target: 0.999}
  - {name: partners, priority: high, match: "198.51.100.0/25"}
  - name: premium
    priority: high
    match: "10.5.0.0/16"
    slo:
      - {kind: pageview, under: 2s, target: 95%, window: 30d}
      - {kind: transaction, under: 250ms, target: 0.999}
default:
  name: rest
  priority: low
  slo: [{kind: pageview, under: 4s, target: "90%", window: 4w}]
`

func TestParseSLOs(t *testing.T) {
	c, err := ParseClasses([]byte(sloSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []ClassSLO{
		{"premium", SLO{Kind: SLOPageview, Under: 2 * time.Second, Target: 0.95, Window: 30 * 24 * time.Hour}},
		{"premium", SLO{Kind: SLOTransaction, Under: 250 * time.Millisecond, Target: 0.999, Window: DefaultSLOWindow}},
		{"rest", SLO{Kind: SLOPageview, Under: 4 * time.Second, Target: 0.9, Window: 28 * 24 * time.Hour}},
	}
	got := c.SLOs()
	if len(got) != len(want) {
		t.Fatalf("SLOs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("SLO %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	ids := []string{"pageview:2s:95%:30d", "transaction:250ms:99.9%:30d", "pageview:4s:90%:28d"}
	for i, id := range ids {
		if got[i].ID() != id {
			t.Errorf("ID %q, want %q", got[i].ID(), id)
		}
	}
	if s := got[0].String(); s != "95% of pageviews under 2s over 30d" {
		t.Errorf("String %q", s)
	}
	// The objectives change nothing about who is in which class.
	if n, p := c.Classify(netip.MustParseAddr("10.5.1.1")); n != "premium" || p != "high" {
		t.Errorf("classify %s %s", n, p)
	}
	if n := testing.AllocsPerRun(100, func() { c.Classify(netip.MustParseAddr("192.0.2.1")) }); n != 0 {
		t.Errorf("Classify allocates %v times with SLOs", n)
	}
	got[0].Class = "changed"
	if c.SLOs()[0].Class != "premium" {
		t.Error("SLOs returns the Classes' own slice")
	}
	if s := DefaultClasses().SLOs(); len(s) != 0 {
		t.Errorf("default classes have SLOs %v", s)
	}
}

func TestSLOErrors(t *testing.T) {
	head := "classes:\n  - name: a\n    match: 10.0.0.0/8\n    slo:\n"
	for _, tc := range []struct{ slo, want string }{
		{"      - {kind: pageviews, under: 2s, target: 95%}\n", `line 5: class "a": slo: kind "pageviews": want pageview or transaction`},
		{"      - {kind: pageview, under: 0s, target: 95%}\n", `line 5: class "a": slo: under "0s"`},
		{"      - {kind: pageview, under: -2s, target: 95%}\n", `under "-2s"`},
		{"      - {kind: pageview, under: fast, target: 95%}\n", `under "fast"`},
		{"      - {kind: pageview, under: 2s, target: 100%}\n", `target "100%"`},
		{"      - {kind: pageview, under: 2s, target: 0}\n", `target "0"`},
		{"      - {kind: pageview, under: 2s, target: 95}\n", `target "95"`},
		{"      - {kind: pageview, under: 2s, target: 1.5}\n", `target "1.5"`},
		{"      - {kind: pageview, under: 2s}\n", "line 5: class \"a\": slo: missing target"},
		{"      - {kind: pageview, target: 95%}\n", "missing under"},
		{"      - {under: 2s, target: 95%}\n", "missing kind"},
		{"      - {kind: pageview, under: 2s, target: 95%, window: 30h}\n", `window "30h"`},
		{"      - {kind: pageview, under: 2s, target: 95%, window: 1d}\n", `window "1d"`},
		{"      - {kind: pageview, under: 2s, target: 95%, windwo: 30d}\n", "field windwo not found"},
		{"      - {kind: pageview, under: 2s, target: 95%}\n      - {kind: pageview, under: 2s, target: 99%}\n",
			`line 6: class "a": slo on pageviews under 2s over 30d given twice (also line 5)`},
		{"      - {kind: pageview, under: 2s, target: 95%}\n  - name: a\n    match: 11.0.0.0/8\n    slo: [{kind: pageview, under: 3s, target: 95%}]\n",
			`line 6: class "a": slo differs from line 2`},
		{"      - {kind: pageview, under: 2s, target: 95%}\ndefault: {name: a, slo: [{kind: transaction, under: 1s, target: 0.9}]}\n",
			`default class: line 6: class "a": slo differs from line 2`},
	} {
		_, err := ParseClasses([]byte(head + tc.slo))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.slo, err, tc.want)
		}
	}
	// A name that is fine for records but not in Prometheus rules is
	// refused only when the class has objectives.
	odd := "classes:\n  - name: 'a {{x}}'\n    match: 10.0.0.0/8\n"
	if _, err := ParseClasses([]byte(odd)); err != nil {
		t.Errorf("class without SLO: %v", err)
	}
	if _, err := ParseClasses([]byte(odd + "    slo: [{kind: pageview, under: 2s, target: 95%}]\n")); err == nil || !strings.Contains(err.Error(), `line 2: class "a {{x}}" has an slo`) {
		t.Errorf("unsafe name with SLO: %v", err)
	}
	// The same list on every entry of a class, or on one only, is fine.
	ok := head + "      - {kind: pageview, under: 2s, target: 95%}\n  - {name: a, match: 11.0.0.0/8}\n"
	if c, err := ParseClasses([]byte(ok)); err != nil || len(c.SLOs()) != 1 {
		t.Errorf("SLO on one entry of two: %v", err)
	}
}

func TestFormatSLODuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * 24 * time.Hour: "30d", 6 * time.Hour: "6h", 90 * time.Minute: "90m", 2 * time.Second: "2s",
		250 * time.Millisecond: "250ms", 1500 * time.Millisecond: "1500ms", 1500 * time.Microsecond: "1.5ms",
	} {
		if got := FormatSLODuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}
