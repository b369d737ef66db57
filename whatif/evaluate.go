package whatif

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"time"
)

// Priority of a class for RT_HIGH and RT_LOW.
type Priority string

const (
	High Priority = "high"
	Low  Priority = "low"
)

// Stat is the sliding-window statistic conditions compare.
type Stat string

const (
	// Median of the window: robust to the failed pageviews (21 s) that a
	// mean would let dominate; the default.
	Median Stat = "median"
	Mean   Stat = "mean"
)

// Options tune a replay. Zero values take the documented defaults.
type Options struct {
	// Priorities maps class -> High or Low. Unlisted classes are Low (the
	// pageview stage's default class is low priority).
	Priorities map[string]Priority
	// Window: conditions see the units completed within the last Window
	// before the moment they are judged (default 30 s, 1 s .. 1 h).
	Window time.Duration
	// WindowSamples bounds each window to its most recent completions
	// (default 4096, at most 65536).
	WindowSamples int
	// Stat: Median (default) or Mean of the window. An empty window makes
	// every RT comparison false: no evidence, no action.
	Stat Stat
	// Edges are histogram bucket lower bounds in ns, ascending (default
	// DefaultEdges); at most 1000.
	Edges []int64
	// SYNTimeout is the client's initial SYN retransmission timeout, doubling
	// per attempt (default 3 s, the classic value of the RLM experiments;
	// Linux uses 1 s).
	SYNTimeout time.Duration
	// SYNAttempts: SYNs a client sends before the connection fails (default
	// 3: 3+6+12 = 21 s to failure, at most 10).
	SYNAttempts int
	// Passes bounds the replays run to settle the load feedback of DROP SYN
	// and REMOVE EMBEDS (default 4, at most 10).
	Passes int
	// LoadModel replaces the model fitted on the capture when set.
	LoadModel *LoadModel
}

// DefaultEdges are histogram bucket lower bounds: 0, 0.5, 1, 2, 3 ... s, with
// the RLM experiments' peaks (3, 5, 8, 21 s) falling into their own buckets.
var DefaultEdges = func() []int64 {
	var e []int64
	for _, s := range []float64{0, 0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6, 7, 8, 9, 10, 12, 15, 18, 21, 25, 30, 60} {
		e = append(e, int64(s*1e9))
	}
	return e
}()

func (o Options) withDefaults() (Options, error) {
	if o.Window == 0 {
		o.Window = 30 * time.Second
	}
	if o.Window < time.Second || o.Window > time.Hour {
		return o, fmt.Errorf("whatif: window %v outside 1s..1h", o.Window)
	}
	if o.WindowSamples == 0 {
		o.WindowSamples = 4096
	}
	if o.WindowSamples < 1 || o.WindowSamples > 65536 {
		return o, fmt.Errorf("whatif: window samples %d outside 1..65536", o.WindowSamples)
	}
	switch o.Stat {
	case "":
		o.Stat = Median
	case Median, Mean:
	default:
		return o, fmt.Errorf("whatif: statistic %q: want median or mean", o.Stat)
	}
	if o.Edges == nil {
		o.Edges = DefaultEdges
	}
	if len(o.Edges) == 0 || len(o.Edges) > 1000 || !slices.IsSorted(o.Edges) {
		return o, fmt.Errorf("whatif: histogram edges: want 1..1000 ascending values")
	}
	if o.SYNTimeout == 0 {
		o.SYNTimeout = 3 * time.Second
	}
	if o.SYNTimeout < time.Millisecond || o.SYNTimeout > time.Minute {
		return o, fmt.Errorf("whatif: SYN timeout %v outside 1ms..1m", o.SYNTimeout)
	}
	if o.SYNAttempts == 0 {
		o.SYNAttempts = 3
	}
	if o.SYNAttempts < 1 || o.SYNAttempts > 10 {
		return o, fmt.Errorf("whatif: SYN attempts %d outside 1..10", o.SYNAttempts)
	}
	if o.Passes == 0 {
		o.Passes = 4
	}
	if o.Passes < 1 || o.Passes > 10 {
		return o, fmt.Errorf("whatif: passes %d outside 1..10", o.Passes)
	}
	for c, p := range o.Priorities {
		if p != High && p != Low {
			return o, fmt.Errorf("whatif: class %q: priority %q, want high or low", c, p)
		}
	}
	return o, nil
}

// Distribution summarises response times (ns). Counts[i] counts values in
// [Edges[i], Edges[i+1]); the last bucket is open-ended and values below
// Edges[0] count in the first. Percentiles are nearest-rank.
type Distribution struct {
	Edges  []int64 `json:"edges_ns"`
	Counts []int64 `json:"counts"`
	N      int64   `json:"n"`
	P50    int64   `json:"p50_ns"`
	P75    int64   `json:"p75_ns"`
	P90    int64   `json:"p90_ns"`
	P99    int64   `json:"p99_ns"`
	Mean   int64   `json:"mean_ns"`
}

// NewDistribution summarises values over edges; a measured run (a testbed's
// client-side times) summarised with the same edges compares with a
// predicted one through CDFDistance.
func NewDistribution(values []int64, edges []int64) Distribution {
	if len(edges) == 0 {
		edges = DefaultEdges // no buckets would leave values nowhere to go
	}
	d := Distribution{Edges: slices.Clone(edges), Counts: make([]int64, len(edges)), N: int64(len(values))}
	if len(values) == 0 {
		return d
	}
	v := slices.Clone(values)
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += float64(x)
		i, found := slices.BinarySearch(edges, x)
		if !found {
			i--
		}
		d.Counts[max(i, 0)]++
	}
	rank := func(p float64) int64 {
		k := int(math.Ceil(p*float64(len(v)))) - 1
		return v[min(max(k, 0), len(v)-1)]
	}
	d.P50, d.P75, d.P90, d.P99 = rank(0.5), rank(0.75), rank(0.9), rank(0.99)
	d.Mean = int64(sum / float64(len(v)))
	return d
}

// CDFDistance is the largest difference between the two histograms'
// cumulative fractions (a binned Kolmogorov-Smirnov statistic, 0..1); both
// must use the same edges.
func (d Distribution) CDFDistance(o Distribution) (float64, error) {
	if !slices.Equal(d.Edges, o.Edges) {
		return 0, fmt.Errorf("whatif: distributions have different bucket edges")
	}
	if d.N == 0 || o.N == 0 {
		return 0, fmt.Errorf("whatif: empty distribution")
	}
	var a, b, worst float64
	for i := range d.Counts {
		a += float64(d.Counts[i]) / float64(d.N)
		b += float64(o.Counts[i]) / float64(o.N)
		worst = max(worst, math.Abs(a-b))
	}
	return worst, nil
}

// ClassResult is one class's measured and predicted response times.
type ClassResult struct {
	Class     string       `json:"class"`
	Priority  Priority     `json:"priority"`
	Measured  Distribution `json:"measured"`
	Predicted Distribution `json:"predicted"`
	Affected  int          `json:"affected"` // units some action applied to
	Dropped   int          `json:"dropped"`  // units with at least one SYN dropped
	Failed    int          `json:"failed"`   // units whose connection failed
}

// UnitResult is one unit's measured and predicted response time.
type UnitResult struct {
	ID        string `json:"id"`
	Class     string `json:"class"`
	Start     int64  `json:"start"`
	Measured  int64  `json:"measured_ns"`
	Predicted int64  `json:"predicted_ns"`
	Delay     int64  `json:"delay_ns,omitempty"` // admission delay from dropped SYNs
	Failed    bool   `json:"failed,omitempty"`
}

// Result is the outcome of one replay.
type Result struct {
	Rules     []string      `json:"rules"`
	Unit      string        `json:"unit"` // "pageview" or "transaction"
	Classes   []ClassResult `json:"classes"`
	Units     []UnitResult  `json:"-"`
	Passes    int           `json:"passes"`
	LoadModel LoadModel     `json:"load_model"`
}

// Class returns the named class's result, nil if absent.
func (r *Result) Class(name string) *ClassResult {
	for i := range r.Classes {
		if r.Classes[i].Class == name {
			return &r.Classes[i]
		}
	}
	return nil
}

// Evaluate replays the dataset under rules and predicts every class's
// response-time distribution. The replay is a discrete-event simulation in
// capture time: each unit arrives at its start; the rules are judged then,
// against windows of the predicted response times of the units completed
// before (what an appliance applying the rules would have measured); a
// dropped SYN makes the unit arrive again after the client's retransmission
// timeout. Dropped, delayed and removed work changes the server's load,
// which changes everybody's server time; the replay is repeated with the
// load change of the previous pass until it settles or Options.Passes runs
// out.
func (d *Dataset) Evaluate(rules []Rule, opts Options) (*Result, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("whatif: %d rules, at most %d", len(rules), MaxRules)
	}
	model := d.model
	if o.LoadModel != nil {
		model = *o.LoadModel
	}
	var delta loadDelta
	var units []UnitResult
	var st []unitState
	passes := 0
	for passes < o.Passes {
		passes++
		units, st = d.replay(rules, &o, model, &delta)
		next := d.loadChange(st)
		if sameDelta(&next, &delta) {
			break
		}
		delta = next
	}
	res := &Result{Unit: "transaction", Passes: passes, LoadModel: model, Units: units}
	if d.pageviews {
		res.Unit = "pageview"
	}
	for _, r := range rules {
		res.Rules = append(res.Rules, r.String())
	}
	for _, c := range d.classes {
		cr := ClassResult{Class: c, Priority: priorityOf(&o, c)}
		var meas, pred []int64
		for i, u := range units {
			if u.Class != c {
				continue
			}
			meas, pred = append(meas, u.Measured), append(pred, u.Predicted)
			if st[i].act.any {
				cr.Affected++
			}
			if st[i].dropped {
				cr.Dropped++
			}
			if u.Failed {
				cr.Failed++
			}
		}
		cr.Measured, cr.Predicted = NewDistribution(meas, o.Edges), NewDistribution(pred, o.Edges)
		res.Classes = append(res.Classes, cr)
	}
	return res, nil
}

func priorityOf(o *Options, class string) Priority {
	if p, ok := o.Priorities[class]; ok {
		return p
	}
	return Low
}

type unitState struct {
	act     active
	dropped bool
	failed  bool
	delay   int64
}

// window holds the predicted response times of recently completed units:
// in completion order for eviction, and sorted for the median (insertion
// into a sorted slice of at most WindowSamples values is a short memmove,
// so each completion and each judgement costs O(samples) at worst, O(1) for
// the statistic itself).
type window struct {
	at, val []int64 // completion times and values, oldest first
	sorted  []int64
	sum     float64
}

func (w *window) push(t, v int64, limit int) {
	w.at, w.val = append(w.at, t), append(w.val, v)
	w.sum += float64(v)
	i, _ := slices.BinarySearch(w.sorted, v)
	w.sorted = slices.Insert(w.sorted, i, v)
	if len(w.at) > limit {
		w.drop(1)
	}
}

func (w *window) drop(n int) {
	for _, v := range w.val[:n] {
		w.sum -= float64(v)
		i, _ := slices.BinarySearch(w.sorted, v)
		w.sorted = slices.Delete(w.sorted, i, i+1)
	}
	w.at, w.val = w.at[n:], w.val[n:]
}

func (w *window) evict(before int64) {
	n := 0
	for n < len(w.at) && w.at[n] < before {
		n++
	}
	if n > 0 {
		w.drop(n)
	}
}

func (w *window) stat(s Stat) (int64, bool) {
	if len(w.val) == 0 {
		return 0, false
	}
	if s == Mean {
		return int64(w.sum / float64(len(w.val))), true
	}
	return w.sorted[(len(w.sorted)-1)/2], true // lower median: an observed value
}

// event is a unit completing (window update) or arriving again after a
// dropped SYN.
type event struct {
	t       int64
	done    bool // completion: sorts before arrivals at the same time
	unit    int
	attempt int
	value   int64
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].done && !h[j].done
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type replayer struct {
	d       *Dataset
	o       *Options
	rules   []Rule
	windows map[string]*window // "*", "high", "low", "class:NAME"
}

func (r *replayer) win(key string) *window {
	w := r.windows[key]
	if w == nil {
		w = &window{}
		r.windows[key] = w
	}
	return w
}

func (r *replayer) complete(class string, t, v int64) {
	lim := r.o.WindowSamples
	r.win("*").push(t, v, lim)
	r.win(string(priorityOf(r.o, class))).push(t, v, lim)
	r.win("class:"+class).push(t, v, lim)
}

func (r *replayer) metric(c *RTCond, now int64) (int64, bool) {
	key := "*"
	switch c.Metric {
	case MetricHigh:
		key = string(High)
	case MetricLow:
		key = string(Low)
	case MetricClass:
		key = "class:" + c.Class
	}
	w := r.win(key)
	w.evict(now - int64(r.o.Window))
	return w.stat(r.o.Stat)
}

func (r *replayer) holds(c Cond, u *unit, now int64) bool {
	switch c := c.(type) {
	case *And:
		return r.holds(c.L, u, now) && r.holds(c.R, u, now)
	case *Or:
		return r.holds(c.L, u, now) || r.holds(c.R, u, now)
	case *AddrCond:
		return c.Match(u.client)
	case *ClassCond:
		return (u.class == c.Class) != c.Neg
	case *RTCond:
		v, ok := r.metric(c, now)
		return ok && c.Op.compare(v, int64(c.Value))
	}
	return false
}

func (d *Dataset) replay(rules []Rule, o *Options, model LoadModel, delta *loadDelta) ([]UnitResult, []unitState) {
	r := &replayer{d: d, o: o, rules: rules, windows: map[string]*window{}}
	out := make([]UnitResult, len(d.units))
	st := make([]unitState, len(d.units))
	var h eventHeap
	next := 0
	timeout := int64(o.SYNTimeout)
	for next < len(d.units) || len(h) > 0 {
		var ev event
		if len(h) > 0 && (next == len(d.units) || h[0].t <= d.units[next].start) {
			ev = heap.Pop(&h).(event)
		} else {
			ev = event{t: d.units[next].start, unit: next}
			next++
		}
		u := &d.units[ev.unit]
		if ev.done {
			r.complete(u.class, ev.t, ev.value)
			continue
		}
		var act active
		for _, rule := range rules {
			if r.holds(rule.Cond, u, ev.t) {
				for _, a := range rule.Actions {
					act.add(a)
				}
			}
		}
		s := &st[ev.unit]
		if act.drop && d.droppable(u) {
			s.dropped = true
			if ev.attempt+1 >= o.SYNAttempts {
				// The last SYN was dropped too: the client gives up one more
				// (doubled) timeout later.
				wait := timeout * (int64(1)<<o.SYNAttempts - 1)
				s.failed, s.act = true, act
				out[ev.unit] = UnitResult{ID: u.id, Class: u.class, Start: u.start, Measured: u.total,
					Predicted: wait, Delay: wait, Failed: true}
				heap.Push(&h, event{t: u.start + wait, done: true, unit: ev.unit, value: wait})
				continue
			}
			heap.Push(&h, event{t: u.start + timeout*(int64(1)<<(ev.attempt+1)-1), unit: ev.unit, attempt: ev.attempt + 1})
			continue
		}
		s.act = act
		s.delay = ev.t - u.start
		p := s.delay + d.predict(u, &act, model, delta, s.delay)
		out[ev.unit] = UnitResult{ID: u.id, Class: u.class, Start: u.start, Measured: u.total, Predicted: p, Delay: s.delay}
		heap.Push(&h, event{t: u.start + p, done: true, unit: ev.unit, value: p})
	}
	return out, st
}

// droppable: only a unit that begins with a new connection has a first SYN
// to drop.
func (d *Dataset) droppable(u *unit) bool {
	first := u.container
	if first < 0 && len(u.txs) > 0 {
		first = u.txs[0]
	}
	return first >= 0 && d.txs[first].fresh
}

// predict is the unit's response time under act, excluding admission delay.
func (d *Dataset) predict(u *unit, a *active, model LoadModel, delta *loadDelta, shift int64) int64 {
	if len(u.txs) == 0 {
		return u.total
	}
	type txNew struct{ end, newEnd int64 }
	ends := make(map[int]txNew, len(u.txs))
	var measuredMax, newMax int64 = math.MinInt64, math.MinInt64
	var contEnd, contShift int64
	contDone := false
	remove := a.remove && u.container >= 0
	for _, ti := range u.txs {
		t := &d.txs[ti]
		measuredMax = max(measuredMax, t.tx.End)
		if remove && ti != u.container {
			continue
		}
		total := t.tx.Total
		if t.fresh {
			save, add := connEffect(t, a)
			total += add - save
		}
		if a.rewrite && t.embed && t.tx.BodyBytes > a.above {
			total -= rewriteSave(t, a.ratio)
		}
		if s, e, ok := serviceTimes(t); ok && (!delta.empty() || shift != 0) && model.Slope > 0 {
			from := float64(d.conc[ti])
			to := float64(countIn(d.starts, d.ends, s+shift) + delta.at(s+shift))
			if shift != 0 && delta.empty() {
				// Itself at its new time; from the second pass on, the load
				// change of the previous pass holds it (one pass behind).
				to++
			}
			proc := float64(e - s)
			total += int64(math.Round(proc*model.Scale(from, max(to, 1)))) - (e - s)
		}
		// Critical path: the transaction waited for its connection's previous
		// transaction and, if it started after the container ended, for the
		// container. The one that ended last was the gate: the gap after it
		// (think, parse time) is kept. The others only bound the new start:
		// it cannot come before they end (less any measured overlap, as
		// with pipelining), so one that now ends later still delays it.
		type pred struct{ end, newEnd int64 }
		var preds []pred
		if p, ok := ends[t.prev]; ok && t.prev >= 0 {
			preds = append(preds, pred{p.end, p.newEnd})
		}
		if contDone && ti != u.container && t.tx.Start >= contEnd {
			preds = append(preds, pred{contEnd, contEnd - contShift})
		}
		start := t.tx.Start
		if len(preds) > 0 {
			gate := preds[0]
			for _, p := range preds[1:] {
				if p.end > gate.end {
					gate = p
				}
			}
			start -= gate.end - gate.newEnd
			for _, p := range preds {
				start = max(start, p.newEnd-max(0, p.end-t.tx.Start))
			}
		}
		newEnd := start + total
		ends[ti] = txNew{t.tx.End, newEnd}
		newMax = max(newMax, newEnd)
		if ti == u.container {
			contEnd, contShift, contDone = t.tx.End, t.tx.End-newEnd, true
		}
	}
	if newMax == math.MinInt64 {
		return u.total
	}
	return max(0, u.total-(measuredMax-newMax))
}

// loadChange is the load a replay took out of service or moved.
func (d *Dataset) loadChange(st []unitState) loadDelta {
	var l loadDelta
	for ui := range d.units {
		s := &st[ui]
		u := &d.units[ui]
		if !s.failed && s.delay == 0 && !(s.act.remove && u.container >= 0) {
			continue
		}
		for _, ti := range u.txs {
			start, end, ok := serviceTimes(&d.txs[ti])
			if !ok {
				continue
			}
			removed := s.failed || s.delay != 0 || (s.act.remove && ti != u.container)
			if !removed {
				continue
			}
			l.rmStart, l.rmEnd = append(l.rmStart, start), append(l.rmEnd, end)
			if !s.failed && s.delay != 0 && !(s.act.remove && ti != u.container) {
				l.addStart, l.addEnd = append(l.addStart, start+s.delay), append(l.addEnd, end+s.delay)
			}
		}
	}
	l.sort()
	return l
}

func sameDelta(a, b *loadDelta) bool {
	return slices.Equal(a.rmStart, b.rmStart) && slices.Equal(a.rmEnd, b.rmEnd) &&
		slices.Equal(a.addStart, b.addStart) && slices.Equal(a.addEnd, b.addEnd)
}
