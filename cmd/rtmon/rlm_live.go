package main

// rtmon live --rule(s): rtmon applies no RLM action, but it can say when a
// front end running these rules would have switched them on and off on the
// traffic it watches. The conditions are judged by whatif.LiveRules (the
// what-if's own windows) over the completed pageviews and stand-alone
// transactions; each flip becomes an annotation (source rtmon, tag rlm) and
// the rules' state is exported on /metrics.

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/pipeline"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/whatif"
)

// rlmNoteEvery is the rate limit: a rule writes at most one annotation a
// minute (packet time); a rule flapping faster folds its flips into the
// next note.
const rlmNoteEvery = time.Minute

// rlmQueue bounds the annotations waiting for the store: flips happen on
// the pipeline's goroutine, which must not wait for a slow store.
const rlmQueue = 64

type rlmOptions struct {
	rulesFile  string
	rules      []string
	window     time.Duration
	stat       string
	priorities []string
}

func addRLMFlags(f *pflag.FlagSet, o *rlmOptions) {
	f.StringVar(&o.rulesFile, "rules", "", "RLM rules file (as rtmon whatif reads it): annotate when a rule's condition turns on or off on the live traffic")
	f.StringArrayVar(&o.rules, "rule", nil, "an RLM rule to watch, e.g. 'IF RT_HIGH > 2s THEN DROP SYN' (repeatable)")
	f.DurationVar(&o.window, "rule-window", 30*time.Second, "sliding window of the rules' RT conditions (rtmon whatif --window)")
	f.StringVar(&o.stat, "rule-stat", "median", "window statistic of the rules' RT conditions: median or mean")
	f.StringSliceVar(&o.priorities, "priority", nil, "class priorities for RT_HIGH and RT_LOW, e.g. premium=high (besides the --classes file's; unlisted: low)")
}

// watch starts watching the rules, if any were given: a sink on cfg's
// records, the gauges on cfg.Feed's /metrics, annotations into ann (nil:
// flips are logged only). stop ends it once the pipeline is done.
func (o rlmOptions) watch(ctx context.Context, cfg *pipeline.Config, ann query.Annotator, classesFile string) (stop func(), err error) {
	if o.rulesFile == "" && len(o.rules) == 0 {
		return func() {}, nil
	}
	wo := whatifOptions{rulesFile: o.rulesFile, rules: o.rules, priorities: o.priorities, classesFile: classesFile,
		window: o.window, stat: o.stat}
	rules, err := wo.parseRules()
	if err != nil {
		return nil, err
	}
	opts, err := wo.options()
	if err != nil {
		return nil, err
	}
	w, err := newRLMWatcher(rules, opts)
	if err != nil {
		return nil, fmt.Errorf("--rule-window/--rule-stat: %w", err)
	}
	cfg.Sinks = append(cfg.Sinks, w)
	if cfg.Feed != nil {
		cfg.Feed.AddMetrics(w)
	}
	return w.start(ctx, ann, time.Second), nil
}

// rlmNote is a rule's rate-limit state.
type rlmNote struct {
	written bool
	at      int64 // packet time of the last annotation written
	folded  int   // flips since then without an annotation of their own
	last    whatif.Flip
}

// rlmWatcher feeds the records to the rules and turns flips into
// annotations and gauges. Safe for concurrent use.
type rlmWatcher struct {
	mu       sync.Mutex
	live     *whatif.LiveRules
	rules    []string
	window   time.Duration
	notes    []rlmNote
	lastFlip []int64 // packet ns; 0 before the first
	// The packet time at the last record and the wall clock then: a tick
	// judges at the packet time now, so windows empty when traffic stops.
	lastPacket, lastWall int64
	out                  chan query.Annotation
	closed               bool
	lost                 int64

	descActive, descFlip *prometheus.Desc
}

func newRLMWatcher(rules []whatif.Rule, opts whatif.Options) (*rlmWatcher, error) {
	live, err := whatif.NewLiveRules(rules, opts)
	if err != nil {
		return nil, err
	}
	w := &rlmWatcher{live: live, window: cmpOr(opts.Window, 30*time.Second), notes: make([]rlmNote, len(rules)),
		lastFlip: make([]int64, len(rules)), out: make(chan query.Annotation, rlmQueue),
		descActive: prometheus.NewDesc("rtmon_rlm_rule_active",
			"1 while the RLM rule's response-time conditions hold on the live traffic (rtmon live --rule), else 0; rule numbers as given, from 1.",
			[]string{"rule"}, nil),
		descFlip: prometheus.NewDesc("rtmon_rlm_rule_last_flip_timestamp_seconds",
			"Packet time the RLM rule's condition last turned on or off; 0 before the first flip.", []string{"rule"}, nil)}
	for _, r := range rules {
		w.rules = append(w.rules, r.String())
	}
	return w, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// Connection: connections are no units.
func (w *rlmWatcher) Connection(*reconstruct.Connection) {}

// Transaction counts only a transaction the pageview stage left in no
// pageview (a unit of its own, as in the what-if); the others arrive in
// their pageview.
func (w *rlmWatcher) Transaction(t *reconstruct.Transaction) {
	if t.PageviewID == "" {
		w.observe(t.End, t.Class, t.Total, time.Now().UnixNano())
	}
}

func (w *rlmWatcher) Pageview(p *pageview.Pageview) {
	w.observe(p.End, p.Class, p.Total, time.Now().UnixNano())
}

// observe takes a unit that completed at end (packet ns) with wall clock
// wall.
func (w *rlmWatcher) observe(end int64, class string, total, wall int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	flips := w.live.Observe(end, class, total)
	if end > w.lastPacket {
		w.lastPacket, w.lastWall = end, wall
	}
	w.handle(flips, max(end, w.lastPacket))
}

// tick judges the rules at the packet time wall corresponds to, so that a
// condition fed by traffic that stopped turns off as its window empties,
// and writes the notes the rate limit held back.
func (w *rlmWatcher) tick(wall int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.lastWall == 0 {
		return
	}
	now := w.lastPacket + max(0, wall-w.lastWall)
	w.handle(w.live.Judge(now), now)
}

// handle records flips and writes the annotations the rate limit allows at
// packet time now. w.mu held.
func (w *rlmWatcher) handle(flips []whatif.Flip, now int64) {
	for _, f := range flips {
		w.lastFlip[f.Rule] = f.At
		n := &w.notes[f.Rule]
		n.folded++
		n.last = f
	}
	for i := range w.notes {
		n := &w.notes[i]
		if n.folded == 0 || (n.written && now-n.at < int64(rlmNoteEvery)) {
			continue
		}
		w.note(n.last, n.folded-1)
		n.written, n.at, n.folded = true, now, 0
	}
}

// note queues the annotation of flip f, which folds folded earlier flips.
// w.mu held.
func (w *rlmWatcher) note(f whatif.Flip, folded int) {
	state := "off"
	if f.On {
		state = "on"
	}
	var ms []string
	for _, m := range f.Metrics {
		if m.OK {
			ms = append(ms, fmt.Sprintf("%s %.2fs", m.Name, time.Duration(m.Value).Seconds()))
		} else {
			ms = append(ms, m.Name+" no units")
		}
	}
	text := fmt.Sprintf("RLM rule %d %s: %s", f.Rule+1, state, w.rules[f.Rule])
	if len(ms) > 0 {
		text += fmt.Sprintf(" (%s over the %v window)", strings.Join(ms, ", "), w.window)
	}
	if folded > 0 {
		text += fmt.Sprintf("; %d earlier flips within a minute folded into this note", folded)
	}
	a := query.Annotation{TimeMs: f.At / int64(time.Millisecond), Source: query.SourceRtmon, Tags: []string{"rlm"}, Text: text}
	select {
	case w.out <- a:
	default:
		w.lost++
		slog.Warn("live: RLM annotation queue full, note dropped", "rule", f.Rule+1, "dropped", w.lost)
	}
}

// start writes the queued annotations into ann (or logs them) and ticks
// every interval until ctx ends or stop is called; stop writes what is
// still queued.
func (w *rlmWatcher) start(ctx context.Context, ann query.Annotator, interval time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for a := range w.out {
			if ann == nil {
				slog.Info("live: "+a.Text, "time", time.UnixMilli(a.TimeMs).UTC())
				continue
			}
			// Written after Ctrl-C too: the last flips belong on the chart.
			actx, acancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if _, err := ann.AddAnnotation(actx, a); err != nil {
				slog.Warn("live: could not annotate an RLM rule flip", "err", err)
			}
			acancel()
		}
	}()
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				w.tick(now.UnixNano())
			}
		}
	}()
	return func() {
		cancel()
		w.mu.Lock()
		if !w.closed {
			w.closed = true
			close(w.out)
		}
		w.mu.Unlock()
		wg.Wait()
	}
}

// Describe: the descriptors are fixed.
func (w *rlmWatcher) Describe(ch chan<- *prometheus.Desc) {
	ch <- w.descActive
	ch <- w.descFlip
}

// Collect exports each rule's state and last flip.
func (w *rlmWatcher) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	active, flips := w.live.Active(), append([]int64(nil), w.lastFlip...)
	w.mu.Unlock()
	for i, on := range active {
		rule := strconv.Itoa(i + 1)
		v := 0.0
		if on {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(w.descActive, prometheus.GaugeValue, v, rule)
		ch <- prometheus.MustNewConstMetric(w.descFlip, prometheus.GaugeValue, float64(flips[i])/1e9, rule)
	}
}
