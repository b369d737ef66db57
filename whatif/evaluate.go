package whatif

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Priority of a class for RT_HIGH and RT_LOW.
type Priority string

const (
	High Priority = "high"
	Low  Priority = "low"
)

// ParsePriority reads one "class=high" or "class=low" (case-insensitive
// priority, spaces around either side ignored), as --priority and the
// page's priority= parameter write them.
func ParsePriority(pair string) (class string, p Priority, err error) {
	name, prio, ok := strings.Cut(pair, "=")
	name = strings.TrimSpace(name)
	switch strings.ToLower(strings.TrimSpace(prio)) {
	case "high":
		p = High
	case "low":
		p = Low
	default:
		ok = false
	}
	if !ok || name == "" {
		return "", "", fmt.Errorf("priority %q: want class=high or class=low", pair)
	}
	return name, p, nil
}

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
	// ReportDelay is how long after a unit completes the conditions see
	// it: the delay of the measurement that drives the front end (0: at
	// once; at most 10 min). rtmon live reports a pageview only when its
	// idle gap has passed (Dataset.LiveReportDelay, 8 s), so a front end
	// acting on rtmon's RT_HIGH acts that much behind the pages it
	// measures.
	ReportDelay time.Duration
	// Stat: Median (default) or Mean of the window. An empty window makes
	// every RT comparison false: no evidence, no action.
	Stat Stat
	// Edges are histogram bucket lower bounds in ns, ascending (default
	// DefaultEdges); at most 1000.
	Edges []int64
	// SYNTimeout, when set, is every client's initial SYN retransmission
	// timeout, doubling per attempt (3 s: the classic stacks of the RLM
	// experiments; 1 s: Linux). Zero (the default) learns each client's
	// schedule from the capture's SYN retransmissions: its own, else its
	// class's, else the capture's, else 1 s doubling (Dataset.SYNSchedules).
	SYNTimeout time.Duration
	// SYNAttempts: SYNs a client sends before the connection fails (default
	// 3: 3+6+12 = 21 s to failure, at most 10).
	SYNAttempts int
	// Passes bounds the replays run to settle the load feedback of DROP SYN
	// and REMOVE EMBEDS (default 4, at most 10).
	Passes int
	// Members (queue model): how many replays a prediction pools when the
	// front end's FAST SYN copies meet a modelled backlog. Such replays
	// are chaotic: moving the timers the model sets on its own (the
	// copies, requests resent by connections it left half-open) by a
	// millisecond moved a class's replayed p90 by up to 40% on the
	// overload baselines, so one replay is one draw. Each member after
	// the first moves them by up to ±1 ms with its own fixed seed, and
	// the class distributions pool every member's unit times; units list
	// the first member's. Default 8; 1: a single replay; at most 64.
	Members int
	// LoadModel replaces the model fitted on the capture when set.
	LoadModel *LoadModel
	// ServerModel is how the server answers changed load: ServerLinear
	// (the default: server time scales with concurrency, SYN losses stay
	// as measured) or ServerQueue (the fitted queueing server, QueueModel:
	// queueing and SYN drops at a full queue grow and shrink with load).
	ServerModel ServerModel
}

// ServerModel names the server model of a replay.
type ServerModel string

const (
	ServerLinear ServerModel = "linear"
	ServerQueue  ServerModel = "queue"
)

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
	// Checked in field order, so the first bad field is the one reported.
	if err := cmp.Or(
		defaultIn(&o.Window, 30*time.Second, time.Second, time.Hour, "window %v outside 1s..1h"),
		defaultIn(&o.WindowSamples, 4096, 1, 65536, "window samples %d outside 1..65536"),
		defaultIn(&o.ReportDelay, 0, 0, 10*time.Minute, "report delay %v outside 0..10m"),
	); err != nil {
		return o, err
	}
	if err := defaultOneOf(&o.Stat, Median, []Stat{Median, Mean}, "statistic"); err != nil {
		return o, err
	}
	if o.Edges == nil {
		o.Edges = DefaultEdges
	}
	if len(o.Edges) == 0 || len(o.Edges) > 1000 || !slices.IsSorted(o.Edges) {
		return o, fmt.Errorf("whatif: histogram edges: want 1..1000 ascending values")
	}
	if err := cmp.Or(
		defaultIn(&o.SYNAttempts, 3, 1, 10, "SYN attempts %d outside 1..10"),
		defaultIn(&o.Passes, 4, 1, 10, "passes %d outside 1..10"),
		defaultIn(&o.Members, 8, 1, 64, "members %d outside 1..64"),
	); err != nil {
		return o, err
	}
	if o.SYNTimeout != 0 && (o.SYNTimeout < time.Millisecond || o.SYNTimeout > time.Minute) {
		return o, fmt.Errorf("whatif: SYN timeout %v outside 1ms..1m", o.SYNTimeout)
	}
	if err := defaultOneOf(&o.ServerModel, ServerLinear, []ServerModel{ServerLinear, ServerQueue}, "server model"); err != nil {
		return o, err
	}
	for c, p := range o.Priorities {
		if p != High && p != Low {
			return o, fmt.Errorf("whatif: class %q: priority %q, want high or low", c, p)
		}
	}
	return o, nil
}

// defaultOneOf sets an empty *v to def and checks that it is one of ok.
func defaultOneOf[T ~string](v *T, def T, ok []T, what string) error {
	if *v == "" {
		*v = def
	}
	if slices.Contains(ok, *v) {
		return nil
	}
	names := make([]string, len(ok))
	for i, x := range ok {
		names[i] = string(x)
	}
	return fmt.Errorf("whatif: %s %q: want %s", what, *v, strings.Join(names, " or "))
}

// defaultIn sets a zero *v to def and checks that it lies in [lo, hi];
// msg formats the error with the value.
func defaultIn[T int | time.Duration](v *T, def, lo, hi T, msg string) error {
	if *v == 0 {
		*v = def
	}
	if *v < lo || *v > hi {
		return fmt.Errorf("whatif: "+msg, *v)
	}
	return nil
}

// Distribution summarises response times (ns). Counts[i] counts values in
// [Edges[i], Edges[i+1]); the last bucket is open-ended and values below
// Edges[0] count in the first. Percentiles are nearest-rank.
type Distribution struct {
	Edges  []int64 `json:"edges_ns"`
	Counts []int64 `json:"counts"`
	N      int64   `json:"n"` // values counted
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
	// Pageviews and Transactions count the class's units by kind: a
	// pageview, or a transaction that belongs to none.
	Pageviews    int `json:"pageviews"`
	Transactions int `json:"transactions"`
	// Band (queue model): the relative error of the null replay's median
	// and p90 for the class, the uncertainty of the prediction. BandFree:
	// the rules took SYNs out of the capture's hands (FAST SYN against a
	// modelled backlog, SPLICE), so Band is the larger of that and the
	// free null replay's (QueueModel's ClassFit.FreeBand).
	Band     *[2]float64 `json:"band,omitempty"`
	BandFree bool        `json:"band_free,omitempty"`
	// MembersP90: the lowest and highest p90 of the class among the
	// members pooled (Result.Members > 1): how far one replay alone could
	// have put it.
	MembersP90 *[2]int64 `json:"members_p90_ns,omitempty"`
	Affected   int       `json:"affected"` // units some action applied to
	Dropped    int       `json:"dropped"`  // units with at least one SYN dropped
	Failed     int       `json:"failed"`   // units whose connection failed
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
	Rules   []string      `json:"rules"`
	Unit    string        `json:"unit"` // Dataset.UnitName
	Classes []ClassResult `json:"classes"`
	Units   []UnitResult  `json:"-"`
	Passes  int           `json:"passes"`
	// Members: the replays pooled into the predicted distributions
	// (Options.Members; 1 when no FAST SYN copy met a modelled backlog).
	Members   int       `json:"members"`
	LoadModel LoadModel `json:"load_model"`
	// ServerModel produced the server times; Queue is the fitted model
	// when it is ServerQueue.
	ServerModel ServerModel `json:"server_model"`
	Queue       *QueueModel `json:"queue,omitempty"`
	// Window and ReportDelay: the conditions' sliding window, and how long
	// after a unit completed they saw it (Options).
	Window      time.Duration `json:"window_ns"`
	ReportDelay time.Duration `json:"report_delay_ns"`
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
	var qf *queueFit
	var delta loadDelta
	var units []UnitResult
	var st []unitState
	var q queueRun
	passes := 0
	if o.ServerModel == ServerQueue {
		// One event loop: the server under the traffic the rules leave,
		// the rules judged on the times it gives.
		qf = d.queueFit(&o)
		model = LoadModel{}
		q = d.runQueue(rules, &o, qf)
		units, st = q.units, q.st
		passes = 1
	}
	for qf == nil && passes < o.Passes {
		passes++
		units, st = d.replay(rules, &o, model, &delta, nil)
		next := d.loadChange(st)
		if sameDelta(&next, &delta) {
			break
		}
		delta = next
	}
	res := &Result{Unit: d.UnitName(), Passes: passes, LoadModel: model, Units: units, ServerModel: o.ServerModel,
		Window: o.Window, ReportDelay: o.ReportDelay, Members: max(q.members, 1)}
	if qf != nil {
		m := qf.model
		res.Queue = &m
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
			if d.isPageview(&d.units[i]) {
				cr.Pageviews++
			} else {
				cr.Transactions++
			}
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
		if q.pooled != nil {
			cr.Predicted, cr.MembersP90 = pooledDistribution(q.pooled[c], o.Edges)
		}
		if res.Queue != nil {
			cr.Band, cr.BandFree = res.Queue.band(c, q.ranFree)
		}
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
