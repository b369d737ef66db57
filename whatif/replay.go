package whatif

// The replay itself: a discrete-event simulation of the units' arrivals and
// completions under the rules (Evaluate drives it pass by pass).

import (
	"math"
	"net/netip"
	"slices"

	"github.com/rtmon/rtmon/internal/minheap"
)

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

// Before orders events by time, a unit's completion before a timeout at
// the same instant.
func (a event) Before(b event) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.done && !b.done
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

// completion is unit ui's completion at end with response time v, as
// the windows receive it: Options.ReportDelay later (complete).
func (r *replayer) completion(ui int, end, v int64) event {
	return event{t: end + int64(r.o.ReportDelay), done: true, unit: ui, value: v}
}

// complete adds a unit of class, its completion ev (completion), to the
// windows, at the time it completed.
func (r *replayer) complete(class string, ev event) {
	r.add(class, ev.t-int64(r.o.ReportDelay), ev.value)
}

// add adds a unit of class that completed at t after v to the windows.
func (r *replayer) add(class string, t, v int64) {
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

func (d *Dataset) replay(rules []Rule, o *Options, model LoadModel, delta *loadDelta, qd *queueDelta) ([]UnitResult, []unitState) {
	r := &replayer{d: d, o: o, rules: rules, windows: map[string]*window{}}
	out := make([]UnitResult, len(d.units))
	st := make([]unitState, len(d.units))
	var h minheap.Heap[event]
	next := 0
	for next < len(d.units) || len(h) > 0 {
		var ev event
		if len(h) > 0 && (next == len(d.units) || h[0].t <= d.units[next].start) {
			ev = h.Pop()
		} else {
			ev = event{t: d.units[next].start, unit: next}
			next++
		}
		u := &d.units[ev.unit]
		if ev.done {
			r.complete(u.class, ev)
			continue
		}
		if !r.arrive(ev, out, st, &h) {
			continue
		}
		s := &st[ev.unit]
		p := s.delay + d.predict(u, &s.act, model, delta, qd, s.delay)
		out[ev.unit] = UnitResult{ID: u.id, Class: u.class, Start: u.start, Measured: u.total, Predicted: p, Delay: s.delay}
		h.Push(r.completion(ev.unit, u.start+p, p))
	}
	return out, st
}

// arrive judges the rules for a unit arriving (or sending its SYN again)
// at ev.t. A unit whose first SYN the rules drop comes again after its
// client's timeout, or fails after its last attempt (its result and
// completion pushed here); otherwise it is admitted (true), with the
// actions and its admission delay in st.
func (r *replayer) arrive(ev event, out []UnitResult, st []unitState, h *minheap.Heap[event]) bool {
	d, o := r.d, r.o
	u := &d.units[ev.unit]
	var act active
	for _, rule := range r.rules {
		if r.holds(rule.Cond, u, ev.t) {
			for _, a := range rule.Actions {
				act.add(a)
			}
		}
	}
	s := &st[ev.unit]
	if act.drop && d.droppable(u) {
		s.dropped = true
		sched := d.synSchedule(u, o)
		if sent := sched.attemptsFor(o.SYNAttempts); ev.attempt+1 >= sent {
			// The last SYN was dropped too: the client gives up one more
			// wait later.
			wait := sched.waitBefore(sent)
			s.failed, s.act = true, act
			out[ev.unit] = UnitResult{ID: u.id, Class: u.class, Start: u.start, Measured: u.total,
				Predicted: wait, Delay: wait, Failed: true}
			h.Push(r.completion(ev.unit, u.start+wait, wait))
			return false
		}
		h.Push(event{t: u.start + sched.waitBefore(ev.attempt+1), unit: ev.unit, attempt: ev.attempt + 1})
		return false
	}
	s.act = act
	s.delay = ev.t - u.start
	return true
}

// synSchedule is how u's client retransmits a dropped SYN: the override,
// else what the capture taught.
func (d *Dataset) synSchedule(u *unit, o *Options) SYNSchedule {
	return d.synScheduleOf(u.client, u.class, o)
}

// synScheduleOf is synSchedule for a client of class.
func (d *Dataset) synScheduleOf(client netip.Addr, class string, o *Options) SYNSchedule {
	if o.SYNTimeout > 0 {
		return SYNSchedule{Initial: o.SYNTimeout, Growth: 2, Source: "override"}
	}
	return d.syn.forClient(client, class)
}

// droppable: only a unit that begins with a new connection has a first SYN
// to drop.
func (d *Dataset) droppable(u *unit) bool {
	first := d.firstConn(u)
	return first >= 0 && d.txs[first].fresh
}

// firstConn is the transaction that opens u: its container, else its
// first transaction; -1 when it has none.
func (d *Dataset) firstConn(u *unit) int {
	if u.container >= 0 || len(u.txs) == 0 {
		return u.container
	}
	return u.txs[0]
}

// predict is the unit's response time under act, excluding admission delay.
func (d *Dataset) predict(u *unit, a *active, model LoadModel, delta *loadDelta, qd *queueDelta, shift int64) int64 {
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
			ca := a
			if qd != nil && qd.fastSYN && a.fastSYNGap() > 0 {
				// The queue replays the copies: its SYN waits replace the
				// analytic saving.
				noFast := *a
				noFast.fastSYN = 0
				ca = &noFast
			}
			save, add := connEffect(t, ca)
			if qd != nil && a.splice {
				// The queue replays when the server accepts the splicer's
				// connection (in the server time it gives).
				add = 0
			}
			total += add - save
		}
		if a.rewrite && t.embed && t.tx.BodyBytes > a.above {
			total -= rewriteSave(t, a.ratio)
		}
		if qd != nil {
			// The queueing server: its replayed server time and, on a new
			// connection, its replayed wait for dropped SYNs.
			total += qd.srv[ti]
			if t.fresh && !a.splice {
				// Spliced, the client's handshake is the splicer's:
				// connEffect took its SYN waits out.
				total += qd.syn[qd.connOf[ti]]
			}
			total = max(total, 0)
		} else if s, e, ok := serviceTimes(t); ok && (!delta.empty() || shift != 0) && model.Slope > 0 {
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
