package whatif

// Live evaluation of the rules' conditions: what a front end applying them
// would see on the traffic rtmon is watching now. It drives the replay's own
// windows (replayer.add and replayer.metric, replay.go), so a condition
// turns on and off live exactly where the what-if would judge it so.

import (
	"fmt"
	"slices"
)

// LiveRules evaluates rules over a live stream of completed units
// (pageviews, and transactions that belong to none). Its memory is the
// replay's windows: the pooled, high, low and per-class windows of
// Options.WindowSamples values each, per-class ones only for the classes an
// RT[class] condition names. Not safe for concurrent use.
type LiveRules struct {
	r      *replayer
	rules  []Rule
	on     []bool
	named  map[string]bool // classes RT[class] conditions read
	newest int64           // the latest moment judged: time only moves on
	judged bool
}

// Flip is a rule's condition turning true (On) or false at At (ns, the
// record time judged).
type Flip struct {
	Rule int // index into the rules given
	On   bool
	At   int64
	// Metrics are the window statistics the rule's RT conditions compare,
	// as they stood at At, in the order the condition names them.
	Metrics []MetricValue
}

// MetricValue is one window statistic: Name as the rules write it (RT,
// RT_HIGH, RT_LOW, RT[class]); OK false when the window is empty (every
// comparison with it false).
type MetricValue struct {
	Name  string
	Value int64 // ns
	OK    bool
}

// NewLiveRules prepares rules for live evaluation under o's priorities,
// window and statistic (the what-if's Options and defaults).
func NewLiveRules(rules []Rule, opts Options) (*LiveRules, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("whatif: %d rules, at most %d", len(rules), MaxRules)
	}
	l := &LiveRules{r: &replayer{o: &o, rules: rules, windows: map[string]*window{}},
		rules: slices.Clone(rules), on: make([]bool, len(rules)), named: map[string]bool{}}
	for _, rule := range rules {
		for _, c := range rtConds(rule.Cond, nil) {
			if c.Metric == MetricClass {
				l.named[c.Class] = true
			}
		}
	}
	return l, nil
}

// Observe takes a unit of class that completed at (ns) after rt (ns), then
// judges the rules at that moment. A unit reported after later ones counts
// from the latest moment judged (the windows keep completion order); one
// older than a whole window is too late to count.
func (l *LiveRules) Observe(at int64, class string, rt int64) []Flip {
	if class == "" {
		class = DefaultClass
	}
	if l.judged && at < l.newest {
		if at < l.newest-int64(l.r.o.Window) {
			return nil
		}
		at = l.newest
	}
	l.r.add(class, at, rt)
	if !l.named[class] {
		// Nobody reads this class's own window: keep memory to the
		// windows the rules read, whatever classes the traffic has.
		delete(l.r.windows, "class:"+class)
	}
	return l.Judge(at)
}

// Judge evaluates every rule at now (ns; an earlier now than already judged
// counts as that moment) and returns the rules whose condition changed. A
// rule's class and address conditions select the units it acts on, not
// when it is on: they count as met (some such unit may arrive), so a rule
// is on while its response-time conditions hold.
func (l *LiveRules) Judge(now int64) []Flip {
	if l.judged {
		now = max(now, l.newest)
	}
	l.newest, l.judged = now, true
	var flips []Flip
	for i, rule := range l.rules {
		on := l.holds(rule.Cond, now)
		if on == l.on[i] {
			continue
		}
		l.on[i] = on
		flips = append(flips, Flip{Rule: i, On: on, At: now, Metrics: l.Metrics(i)})
	}
	return flips
}

// holds is replayer.holds for no unit in particular.
func (l *LiveRules) holds(c Cond, now int64) bool {
	switch c := c.(type) {
	case *And:
		return l.holds(c.L, now) && l.holds(c.R, now)
	case *Or:
		return l.holds(c.L, now) || l.holds(c.R, now)
	case *RTCond:
		return l.r.holds(c, nil, now)
	}
	return true // *AddrCond, *ClassCond: see Judge
}

// Active reports which rules' conditions hold as last judged.
func (l *LiveRules) Active() []bool { return slices.Clone(l.on) }

// Rules are the rules evaluated, in the order given.
func (l *LiveRules) Rules() []Rule { return slices.Clone(l.rules) }

// Metrics are the window statistics rule i's RT conditions compare, as of
// the latest moment judged; each metric once.
func (l *LiveRules) Metrics(i int) []MetricValue {
	var out []MetricValue
	seen := map[string]bool{}
	for _, c := range rtConds(l.rules[i].Cond, nil) {
		name := (&RTCond{Metric: c.Metric, Class: c.Class}).metricName()
		if seen[name] {
			continue
		}
		seen[name] = true
		v, ok := l.r.metric(c, l.newest)
		out = append(out, MetricValue{Name: name, Value: v, OK: ok})
	}
	return out
}

// metricName is the metric as the rules write it (RTCond.String's left
// side).
func (c *RTCond) metricName() string {
	s := c.String()
	return s[:len(s)-len(" "+c.Op.String()+" "+formatDuration(c.Value))]
}

// rtConds appends c's response-time conditions to out, left to right.
func rtConds(c Cond, out []*RTCond) []*RTCond {
	switch c := c.(type) {
	case *And:
		return rtConds(c.R, rtConds(c.L, out))
	case *Or:
		return rtConds(c.R, rtConds(c.L, out))
	case *RTCond:
		return append(out, c)
	}
	return out
}
