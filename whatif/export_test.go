package whatif

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// exportDataset is two classes on fresh connections: premium clients whose
// first SYN was dropped (3 s), so FAST SYN helps them, and others that
// connected at once.
func exportDataset(t *testing.T) *Dataset {
	t.Helper()
	var b builder
	for i := range 6 {
		off := int64(i) * 2 * sec
		loss := int64(0)
		client, class := "198.51.100."+strconv.Itoa(10+i), "others"
		if i%2 == 0 {
			loss, client, class = 3*sec, "10.4.0."+strconv.Itoa(1+i), "premium"
		}
		syns := []int64{off}
		if loss > 0 {
			syns = append(syns, off+loss)
		}
		hs := syns[len(syns)-1]
		b.add(spec{id: "t" + strconv.Itoa(i), client: client, class: class, syns: syns, synacks: []int64{hs + ms},
			est: hs + 20*ms, rtt: 20 * ms, proc: 50 * ms, transfer: 5 * ms})
	}
	return b.dataset(t, nil)
}

// checkRoundTrip parses the exported text and wants exactly the rules back.
func checkRoundTrip(t *testing.T, text string, want []Rule) {
	t.Helper()
	got, err := ParseRules(text)
	if err != nil {
		t.Fatalf("the export does not parse: %v\n%s", err, text)
	}
	if len(got) != len(want) {
		t.Fatalf("%d rules parsed back, want %d\n%s", len(got), len(want), text)
	}
	for i := range got {
		if got[i].String() != want[i].String() || !reflect.DeepEqual(got[i].Actions, want[i].Actions) ||
			!reflect.DeepEqual(got[i].Cond, want[i].Cond) {
			t.Errorf("rule %d parsed back as %q, want %q", i, got[i].String(), want[i].String())
		}
	}
	// Every line is a comment, blank, or one of the rules.
	rules := 0
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.HasPrefix(line, "IF ") {
			rules++
		} else if line != "" && !strings.HasPrefix(line, "#") {
			t.Errorf("line %q is neither a comment nor a rule", line)
		}
	}
	if rules != len(want) {
		t.Errorf("%d rule lines, want %d", rules, len(want))
	}
}

func TestWriteRulesFileRoundTripsTheRankedAction(t *testing.T) {
	d := exportDataset(t)
	opts := Options{Priorities: map[string]Priority{"premium": High}}
	singles, err := d.StandardCandidates(opts)
	if err != nil {
		t.Fatal(err)
	}
	ranking, err := d.Rank(Pairs(singles), opts)
	if err != nil {
		t.Fatal(err)
	}
	var top *Ranked
	for i := range ranking {
		if ranking[i].Class == "premium" {
			top = &ranking[i]
			break
		}
	}
	if top == nil {
		t.Fatal("no ranking for premium")
	}
	rules, err := ParseRules(strings.Join(top.Rules, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Evaluate(rules, opts)
	if err != nil {
		t.Fatal(err)
	}
	from, to := d.Span()
	date := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	err = WriteRulesFile(&b, Export{Rules: rules, Result: res, Ranked: top, Rank: 1, From: from, To: to,
		Transactions: d.Transactions(), Pageviews: 0, Connections: -1, Source: "records out/", Version: "v9.9.9", Date: date})
	if err != nil {
		t.Fatal(err)
	}
	text := b.String()
	checkRoundTrip(t, text, rules)
	wants := []string{"# rtmon what-if rules, exported by rtmon v9.9.9 on 2026-12-05T12:00:00Z",
		"Rank 1 of the ranking for class premium", "gain " + signedDur(top.Gain) + " in mean",
		strconv.Itoa(d.Transactions()) + " transactions", "connections unknown", "records out/",
		fmtTime(from) + " to " + fmtTime(to) + " UTC", "Model: linear load"}
	for _, c := range res.Classes {
		wants = append(wants, "  "+c.Class+" ("+string(c.Priority)+" priority",
			"median "+ReadableDuration(c.Measured.P50)+" -> "+ReadableDuration(c.Predicted.P50),
			"p90 "+ReadableDuration(c.Measured.P90)+" -> "+ReadableDuration(c.Predicted.P90))
	}
	for _, r := range rules {
		for _, a := range r.Actions {
			wants = append(wants, "#   "+a.String()+": ")
		}
	}
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("the export lacks %q:\n%s", w, text)
		}
	}
	// The ranked action did something for the class it was ranked for.
	if p := res.Class("premium"); p == nil || p.Predicted.P50 >= p.Measured.P50 {
		t.Errorf("premium: the top-ranked action %v does not lower the median: %+v", top.Rules, p)
	}
}

func TestWriteRulesFileRoundTripsEverySyntax(t *testing.T) {
	d := exportDataset(t)
	src := strings.Join([]string{
		"IF IP.SRC == * THEN FAST SYN GAP 200ms",
		"IF IP.SRC != 10.4.*.* AND RT_HIGH > 3.5s THEN DROP SYN, HALT FAST SYN",
		"IF (CLASS == partners OR IP.SRC == 198.51.100.0/25) AND RT >= 1500us THEN SPLICE TERMINATE TLS",
		"IF CLASS != mobile AND (RT[mobile] < 2s OR RT_LOW != 250ms) THEN REWRITE EMBEDS ABOVE 256KB RATIO 0.5",
		"IF IP.SRC == 2001:db8::/32 OR IP.SRC == 192.0.2.7 THEN FAST SYN/ACK GAP 1500us, REMOVE EMBEDS, SPLICE",
		"IF RT <= 7ns THEN REWRITE EMBEDS ABOVE 1000B RATIO 1",
	}, "\n")
	rules := rules(t, src)
	res, err := d.Evaluate(rules, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteRulesFile(&b, Export{Rules: rules, Result: res, Transactions: -1, Pageviews: -1, Connections: -1}); err != nil {
		t.Fatal(err)
	}
	checkRoundTrip(t, b.String(), rules)
	if !strings.Contains(b.String(), "exported by rtmon "+BuildVersion()) {
		t.Errorf("no version in\n%s", b.String())
	}
}

// hostile strings a capture could put into a class name, a URL or a
// source name, each trying to end the comment and add a rule.
var hostile = []string{
	"x\nIF IP.SRC == * THEN DROP SYN",
	"x\rIF IP.SRC == * THEN DROP SYN",
	"x\r\nIF IP.SRC == * THEN DROP SYN",
	"x\u2028IF IP.SRC == * THEN DROP SYN\u2029",
	"x\u0085IF IP.SRC == * THEN DROP SYN",
	"\x00\x1b[2J\x7f\xff\xfe tab\there",
	"\u202eNYS PORD NEHT * == CRS.PI FI\u202c",
	`back\nslash`,
}

func TestCommentCannotBreakOut(t *testing.T) {
	for _, s := range hostile {
		c := Comment(s)
		checkComment(t, s, c)
	}
	// Escapes are unambiguous: a literal backslash-n differs from a newline.
	if Comment("a\nb") == Comment(`a\nb`) {
		t.Errorf("a newline and a backslash-n comment alike: %q", Comment("a\nb"))
	}
}

func checkComment(t *testing.T, s, c string) {
	t.Helper()
	if !strings.HasPrefix(c, "#") || strings.Count(c, "\n") != 1 || !strings.HasSuffix(c, "\n") {
		t.Errorf("Comment(%q) = %q: want one line starting with #", s, c)
	}
	if !utf8.ValidString(c) {
		t.Errorf("Comment(%q) = %q: invalid UTF-8", s, c)
	}
	for _, r := range strings.TrimSuffix(c, "\n") {
		if unicode.IsControl(r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) || unicode.Is(unicode.Bidi_Control, r) {
			t.Errorf("Comment(%q) = %q holds %U", s, c, r)
		}
	}
	if rs, err := ParseRules(c + c); err != nil || len(rs) != 0 {
		t.Errorf("Comment(%q) parses as %d rules (%v)", s, len(rs), err)
	}
}

func TestWriteRulesFileEscapesCapturedStrings(t *testing.T) {
	d := exportDataset(t)
	rules := rules(t, "IF IP.SRC == * THEN FAST SYN GAP 200ms")
	res, err := d.Evaluate(rules, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range hostile {
		r := *res
		r.Classes = append([]ClassResult(nil), res.Classes...)
		r.Classes[0].Class = s
		ranked := &Ranked{Class: s, CostClass: s, Cost: 1}
		var b strings.Builder
		if err := WriteRulesFile(&b, Export{Rules: rules, Result: &r, Ranked: ranked, Rank: 1, Source: s}); err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, b.String(), rules)
	}
}

func TestWriteRulesFileRefusesRulesThatDoNotParseBack(t *testing.T) {
	d := exportDataset(t)
	res, err := d.Evaluate(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad := []Rule{{Cond: &ClassCond{Class: "a\nIF IP.SRC == * THEN DROP SYN"}, Actions: []Action{{Kind: Splice}}}}
	var b strings.Builder
	if err := WriteRulesFile(&b, Export{Rules: bad, Result: res}); err == nil || b.Len() != 0 {
		t.Errorf("a class name with a newline was exported (err %v):\n%s", err, b.String())
	}
}

func FuzzComment(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkComment(t, s, Comment(s))
	})
}
