package whatif

import (
	"fmt"
	"io"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Export is a rule set taken away from a what-if for a front end, with what
// the rules file says about it in comments: the prediction, its model, its
// assumptions and the capture it was made from.
type Export struct {
	// Rules are written one per line, in the syntax ParseRules reads.
	Rules []Rule
	// Result is the replay of Rules over the capture (Dataset.Evaluate):
	// the predicted change per class. Required.
	Result *Result
	// Ranked and Rank, when the rules were picked from a ranking: the entry
	// and its 1-based place in Ranked.Class's ranking.
	Ranked *Ranked
	Rank   int
	// From and To bound the capture's records in ns ([From, To); 0 when
	// unknown): Dataset.Span, or the store range read.
	From, To int64
	// Records read: transactions, pageviews and connections (< 0: unknown).
	Transactions, Pageviews, Connections int
	// Source names where the records came from ("store duckdb:/var/rtmon",
	// "records out/"); it is written as a comment, escaped.
	Source string
	// Version of rtmon (default BuildVersion()) and Date of the export
	// (default now).
	Version string
	Date    time.Time
}

// MaxExportRules bounds an exported rule set (a ranking's candidates have
// one or two rules; a user's rules file at most MaxRules).
const MaxExportRules = MaxRules

// WriteRulesFile writes e as a rules file: comment lines, then the rules,
// so that ParseRules of the output gives e.Rules back. Every comment is
// escaped (Comment): captured class names, URLs or a source name cannot end
// a comment line and smuggle a rule in.
func WriteRulesFile(w io.Writer, e Export) error {
	if e.Result == nil {
		return fmt.Errorf("whatif export: no replay result")
	}
	if len(e.Rules) > MaxExportRules {
		return fmt.Errorf("whatif export: %d rules, at most %d", len(e.Rules), MaxExportRules)
	}
	text, err := rulesText(e.Rules)
	if err != nil {
		return err
	}
	var b strings.Builder
	c := func(format string, args ...any) { b.WriteString(Comment(fmt.Sprintf(format, args...))) }
	version := e.Version
	if version == "" {
		version = BuildVersion()
	}
	date := e.Date
	if date.IsZero() {
		date = time.Now()
	}
	c("rtmon what-if rules, exported by rtmon %s on %s", version, date.UTC().Format(time.RFC3339))
	if e.Ranked != nil {
		c("Rank %d of the ranking for class %s: gain %s in mean, %s at p90; cost to others %s; %d units predicted to fail",
			e.Rank, e.Ranked.Class, signedDur(e.Ranked.Gain), signedDur(e.Ranked.GainP90), costText(e.Ranked), e.Ranked.Failed)
	}
	writeCapture(c, &e)
	writeModel(c, e.Result)
	c("")
	c("Predicted per class (measured -> predicted; the sign is the change):")
	for _, cr := range e.Result.Classes {
		writeClass(c, &cr)
	}
	c("")
	c("Assumptions of the models:")
	for _, a := range actionsOf(e.Rules) {
		for i, line := range wrap(a.String()+": "+a.Assumptions(), 76) {
			if i > 0 {
				line = "    " + line
			}
			c("  %s", line)
		}
	}
	c("")
	b.WriteString(text)
	_, err = io.WriteString(w, b.String())
	if err != nil {
		return fmt.Errorf("whatif export: %w", err)
	}
	return nil
}

// rulesText renders the rules one per line and checks that they parse back
// to themselves: a rule built in code with a name the parser would not read
// must not go into a file a front end loads.
func rulesText(rules []Rule) (string, error) {
	var b strings.Builder
	for _, r := range rules {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	back, err := ParseRules(b.String())
	if err != nil {
		return "", fmt.Errorf("whatif export: the rules do not parse back: %w", err)
	}
	if len(back) != len(rules) {
		return "", fmt.Errorf("whatif export: %d rules parse back as %d", len(rules), len(back))
	}
	for i := range back {
		if back[i].String() != rules[i].String() {
			return "", fmt.Errorf("whatif export: rule %q parses back as %q", rules[i].String(), back[i].String())
		}
	}
	return b.String(), nil
}

func writeCapture(c func(string, ...any), e *Export) {
	span := "time range unknown"
	if e.From != 0 || e.To != 0 {
		span = fmtTime(e.From) + " to " + fmtTime(e.To) + " UTC"
		if e.From != 0 && e.To > e.From {
			span += " (" + ReadableDuration(e.To-e.From) + ")"
		}
	}
	src := ""
	if e.Source != "" {
		src = "from " + e.Source + ", "
	}
	c("Capture: %s%s", src, span)
	count := func(n int, what string) string {
		if n < 0 {
			return what + " unknown"
		}
		return strconv.Itoa(n) + " " + what
	}
	c("Records: %s, %s, %s; units replayed: %d (%s)", count(e.Transactions, "transactions"), count(e.Pageviews, "pageviews"),
		count(e.Connections, "connections"), unitTotal(e.Result), e.Result.Unit)
}

func unitTotal(r *Result) int {
	n := 0
	for _, c := range r.Classes {
		n += c.Pageviews + c.Transactions
	}
	return n
}

func writeModel(c func(string, ...any), r *Result) {
	c("Conditions: RT over the units completed in the last %s, each seen %s after it completed (the measurement's delay)",
		ReadableDuration(int64(r.Window)), ReadableDuration(int64(r.ReportDelay)))
	if q := r.Queue; r.ServerModel == ServerQueue && q != nil {
		c("Model: fitted queueing server, %d workers, backlog %d; null replay within %.1f%% (%.1f%% with every SYN judged by the model); %d replay(s) pooled",
			q.Workers, q.Backlog, 100*q.Worst, 100*q.FreeWorst, r.Members)
		return
	}
	m := r.LoadModel
	c("Model: linear load, server time = %s + %s x concurrency (%d samples); %d replay pass(es)",
		ReadableDuration(int64(m.Intercept)), ReadableDuration(int64(m.Slope)), m.Samples, r.Passes)
}

// BandSource says what a class's band is the error of.
func BandSource(free bool) string {
	if free {
		return "the null replay's error with every SYN judged by the model, as these rules have it"
	}
	return "the null replay's error"
}

func writeClass(c func(string, ...any), cr *ClassResult) {
	band := "no model band (linear model)"
	if cr.Band != nil {
		band = fmt.Sprintf("model band ±%.1f%% (median), ±%.1f%% (p90): %s", 100*cr.Band[0], 100*cr.Band[1], BandSource(cr.BandFree))
	}
	c("  %s (%s priority; %d pageviews, %d stand-alone transactions):", cr.Class, cr.Priority, cr.Pageviews, cr.Transactions)
	c("    median %s -> %s (%s), p90 %s -> %s (%s); %s",
		ReadableDuration(cr.Measured.P50), ReadableDuration(cr.Predicted.P50), change(cr.Measured.P50, cr.Predicted.P50),
		ReadableDuration(cr.Measured.P90), ReadableDuration(cr.Predicted.P90), change(cr.Measured.P90, cr.Predicted.P90), band)
	if r := cr.MembersP90; r != nil {
		c("    p90 pooled over several replays; one alone gave %s to %s", ReadableDuration(r[0]), ReadableDuration(r[1]))
	}
	c("    affected %d, SYN dropped %d, failed %d", cr.Affected, cr.Dropped, cr.Failed)
}

// change is predicted minus measured, with its share of measured.
func change(meas, pred int64) string {
	s := signedDur(pred - meas)
	if meas != 0 {
		s += fmt.Sprintf(", %+.1f%%", 100*float64(pred-meas)/float64(meas))
	}
	return s
}

func costText(r *Ranked) string {
	if r.Cost <= 0 || r.CostClass == "" {
		return "none"
	}
	return ReadableDuration(r.Cost) + " (" + r.CostClass + ")"
}

// actionsOf lists the rules' distinct actions in order of appearance.
func actionsOf(rules []Rule) []Action {
	seen := map[string]bool{}
	var out []Action
	for _, r := range rules {
		for _, a := range r.Actions {
			if !seen[a.String()] {
				seen[a.String()] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// Comment renders s as one "# " comment line (newline included) that
// ParseRules skips whatever s holds: line breaks (\n, \r, U+0085, U+2028,
// U+2029), other control characters, bidirectional overrides (which can
// make an editor show a rule that is not there) and invalid UTF-8 are
// written as Go escapes, and backslashes doubled so the escapes are
// unambiguous.
func Comment(s string) string {
	var b strings.Builder
	b.WriteString("#")
	if s != "" {
		b.WriteByte(' ')
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\t':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\x%02x`, r)
		case r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
			r == 0x200e || r == 0x200f || r == 0x061c || r == 0xfeff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += n
	}
	b.WriteByte('\n')
	return b.String()
}

// wrap splits text at spaces into lines of at most width characters (a
// longer word stays whole).
func wrap(text string, width int) []string {
	var lines []string
	var cur strings.Builder
	for _, w := range strings.Fields(text) {
		if cur.Len() > 0 && utf8.RuneCountInString(cur.String())+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, cur.String())
			cur.Reset()
		}
		if cur.Len() > 0 {
			cur.WriteByte(' ')
		}
		cur.WriteString(w)
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	return lines
}

// BuildVersion is rtmon's version as the binary knows it: the module
// version, with the VCS revision and its time when built from a checkout.
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev + dirty
		if at != "" {
			v += " (" + at + ")"
		}
	}
	return v
}

// Span is the capture's time range in ns: the first transaction's start
// and the last one's end ([From, To); 0, 0 when there are none).
func (d *Dataset) Span() (from, to int64) {
	for i, t := range d.txs {
		if i == 0 || t.tx.Start < from {
			from = t.tx.Start
		}
		to = max(to, t.tx.End+1)
	}
	return from, to
}

// Transactions is the number of transactions in the dataset.
func (d *Dataset) Transactions() int { return len(d.txs) }

func fmtTime(ns int64) string {
	if ns == 0 {
		return "open"
	}
	return time.Unix(0, ns).UTC().Format("2006-01-02 15:04:05.000")
}

// ReadableDuration rounds a duration for reading: whole ms above 1 ms,
// 100 ms above 10 s (the CLI's report prints the same).
func ReadableDuration(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d >= 10*time.Second || d <= -10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Millisecond || d <= -time.Millisecond:
		return d.Round(time.Millisecond).String()
	}
	return d.String()
}

func signedDur(ns int64) string {
	if ns > 0 {
		return "+" + ReadableDuration(ns)
	}
	return ReadableDuration(ns)
}
