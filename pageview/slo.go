package pageview

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// SLO is a class's service level objective: Target of its records of Kind
// take less than Under, counted over Window ("95% of pageviews under 2 s,
// over 30 days").
type SLO struct {
	Kind   string // SLOPageview or SLOTransaction
	Under  time.Duration
	Target float64 // in (0, 1)
	Window time.Duration
}

// The record kinds an SLO can be about.
const (
	SLOPageview    = "pageview"
	SLOTransaction = "transaction"
)

// ClassSLO is one objective of one class.
type ClassSLO struct {
	Class string
	SLO
}

// Bounds of an SLO. The window bounds keep the burn-rate alerts meaningful:
// their longest window is 3 days, so a window under a week would leave the
// ticket alert nothing to average. Thresholds stay inside the rollup grid.
const (
	minSLOUnder  = time.Millisecond
	maxSLOUnder  = time.Hour
	minSLOWindow = 7 * 24 * time.Hour
	maxSLOWindow = 366 * 24 * time.Hour
	// DefaultSLOWindow is the window of an SLO that names none.
	DefaultSLOWindow = 30 * 24 * time.Hour
	maxSLOsPerClass  = 16
)

// ID names the objective in metric labels: "pageview:2s:95%:30d". It is
// stable for a given objective, so dashboards and silences can name it.
func (s SLO) ID() string {
	return s.Kind + ":" + FormatSLODuration(s.Under) + ":" + formatPercent(s.Target) + ":" + FormatSLODuration(s.Window)
}

// String says the objective in words: "95% of pageviews under 2s over 30d".
func (s SLO) String() string {
	return formatPercent(s.Target) + " of " + s.Kind + "s under " + FormatSLODuration(s.Under) + " over " + FormatSLODuration(s.Window)
}

// SLOs returns every class's objectives, classes in the order the file
// names them first (the default class last), each class's in its order.
func (c *Classes) SLOs() []ClassSLO {
	if c == nil {
		return nil
	}
	return append([]ClassSLO(nil), c.slos...)
}

// sloLabelSafe is what a class with an SLO may be named: its name goes
// into Prometheus rules, label values and alert annotations (which
// Prometheus expands as templates), so it is kept to plain characters.
var sloLabelSafe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.:-]*$`)

// CheckSLOClassName reports whether a class name is safe in generated
// Prometheus rules (see sloLabelSafe).
func CheckSLOClassName(name string) error {
	if !sloLabelSafe.MatchString(name) || len(name) > 64 {
		return fmt.Errorf("class %q has an slo: its name must be 1-64 letters, digits, _ - . or : (it goes into Prometheus rules)", name)
	}
	return nil
}

// sloEntry is one objective as written; nodes keep their lines.
type sloEntry struct {
	Kind   yaml.Node `yaml:"kind"`
	Under  yaml.Node `yaml:"under"`
	Target yaml.Node `yaml:"target"`
	Window yaml.Node `yaml:"window"`
}

// sloList is a class entry's objectives as parsed, with the line of the
// list for messages.
type sloList struct {
	slos []SLO
	line int
}

// parseSLOs checks one class entry's slo list. Within a list, two
// objectives on the same kind, threshold and window conflict (or repeat).
func parseSLOs(class string, line int, entries []sloEntry) (sloList, error) {
	out := sloList{line: line}
	if len(entries) == 0 {
		return out, nil
	}
	if err := CheckSLOClassName(class); err != nil {
		return out, fmt.Errorf("line %d: %w", line, err)
	}
	if len(entries) > maxSLOsPerClass {
		return out, fmt.Errorf("line %d: class %q: %d objectives, at most %d", line, class, len(entries), maxSLOsPerClass)
	}
	type sloKey struct {
		kind          string
		under, window time.Duration
	}
	lines := map[sloKey]int{}
	for _, e := range entries {
		s, l, err := parseSLO(e)
		if l == 0 {
			l = line
		}
		if err != nil {
			return out, fmt.Errorf("line %d: class %q: slo: %w", l, class, err)
		}
		key := sloKey{s.Kind, s.Under, s.Window}
		if prev, ok := lines[key]; ok {
			return out, fmt.Errorf("line %d: class %q: slo on %ss under %s over %s given twice (also line %d)", l, class, s.Kind,
				FormatSLODuration(s.Under), FormatSLODuration(s.Window), prev)
		}
		lines[key] = l
		out.slos = append(out.slos, s)
	}
	return out, nil
}

// parseSLO checks one objective; it returns the line to blame.
func parseSLO(e sloEntry) (SLO, int, error) {
	line := e.Kind.Line
	s := SLO{Window: DefaultSLOWindow}
	switch {
	case e.Kind.Kind != yaml.ScalarNode:
		return s, e.Under.Line, fmt.Errorf("missing kind (pageview or transaction)")
	case e.Kind.Value != SLOPageview && e.Kind.Value != SLOTransaction:
		return s, line, fmt.Errorf("kind %q: want pageview or transaction", e.Kind.Value)
	case e.Under.Kind != yaml.ScalarNode:
		return s, line, fmt.Errorf("missing under (a threshold such as 2s)")
	case e.Target.Kind != yaml.ScalarNode:
		return s, line, fmt.Errorf("missing target (such as 95%% or 0.95)")
	}
	s.Kind = e.Kind.Value
	under, err := time.ParseDuration(e.Under.Value)
	if err != nil || under < minSLOUnder || under > maxSLOUnder {
		return s, e.Under.Line, fmt.Errorf("under %q: want a duration from %v to %v such as 2s or 250ms", e.Under.Value, minSLOUnder, maxSLOUnder)
	}
	s.Under = under
	if s.Target, err = parseTarget(e.Target.Value); err != nil {
		return s, e.Target.Line, err
	}
	if e.Window.Kind == yaml.ScalarNode {
		w, err := parseWindow(e.Window.Value)
		if err != nil || w < minSLOWindow || w > maxSLOWindow {
			return s, e.Window.Line, fmt.Errorf("window %q: want whole days or weeks from 7d to 366d, such as 30d or 4w", e.Window.Value)
		}
		s.Window = w
	} else if e.Window.Kind != 0 {
		return s, e.Window.Line, fmt.Errorf("window must be a duration such as 30d")
	}
	return s, line, nil
}

// parseTarget reads "95%", "99.9%" or 0.95: a ratio strictly between 0 and 1.
func parseTarget(v string) (float64, error) {
	bad := fmt.Errorf("target %q: want a percentage such as 95%% or a ratio such as 0.95, above 0 and below 100%%", v)
	num, pct := strings.CutSuffix(strings.TrimSpace(v), "%")
	t, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil {
		return 0, bad
	}
	if pct {
		t /= 100
	}
	if !(t > 0 && t < 1) {
		return 0, bad
	}
	return t, nil
}

// parseWindow reads whole days ("30d") or weeks ("4w").
func parseWindow(v string) (time.Duration, error) {
	unit := 24 * time.Hour
	num, ok := strings.CutSuffix(v, "d")
	if !ok {
		if num, ok = strings.CutSuffix(v, "w"); !ok {
			return 0, fmt.Errorf("no d or w unit")
		}
		unit *= 7
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || n > 1000 {
		return 0, fmt.Errorf("bad count %q", num)
	}
	return time.Duration(n) * unit, nil
}

// FormatSLODuration writes a duration in Prometheus's style: the largest
// unit it is a whole number of (30d, 6h, 5m, 2s, 250ms), else Go's form.
func FormatSLODuration(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.name
		}
	}
	return d.String()
}

// formatPercent writes a ratio as a percentage with the digits it was
// given (0.999 is "99.9%", not 99.89999999999999%).
func formatPercent(r float64) string {
	return strconv.FormatFloat(r*100, 'g', 10, 64) + "%"
}

// addSLOs records a class entry's objectives: entries of one class
// (several rules, or a rule and the default) either give no slo or the
// same list, so that no entry's objectives silently win over another's.
func (c *Classes) addSLOs(class string, line int, entries []sloEntry, given map[string]sloList) error {
	l, err := parseSLOs(class, line, entries)
	if err != nil {
		return err
	}
	if len(l.slos) == 0 {
		return nil
	}
	if prev, ok := given[class]; ok {
		if !sameSLOs(prev.slos, l.slos) {
			return fmt.Errorf("line %d: class %q: slo differs from line %d (give it once, or the same on every entry)", l.line, class, prev.line)
		}
		return nil
	}
	given[class] = l
	for _, s := range l.slos {
		c.slos = append(c.slos, ClassSLO{Class: class, SLO: s})
	}
	return nil
}

func sameSLOs(a, b []SLO) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
