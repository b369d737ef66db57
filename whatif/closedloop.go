package whatif

import (
	"math"
	"slices"

	"github.com/rtmon/rtmon/internal/minheap"
)

// replayQueue is the replay under the queue model as one event loop. Units
// arrive and the rules are judged as in replay, but an admitted unit's
// connections go into the server simulation, and the unit completes, and
// joins the windows the rules see, only when the simulation has served its
// last transaction. A condition that an action makes false (RT_HIGH falls
// once the low class is dropped) is judged on the times the action itself
// produced, so it switches on and off within the run as an appliance's
// would.
func (d *Dataset) replayQueue(rules []Rule, o *Options, qf *queueFit) ([]UnitResult, []unitState) {
	q := qf.data
	r := &replayer{d: d, o: o, rules: rules, windows: map[string]*window{}}
	out := make([]UnitResult, len(d.units))
	st := make([]unitState, len(d.units))
	ch := &queueChange{connDelay: make([]int64, len(q.conns)), connGone: make([]bool, len(q.conns)),
		connSpliced: make([]bool, len(q.conns)), connAttempt: make([]int, len(q.conns)), txsRemoved: make([]bool, len(q.txs))}
	sim := d.newQueueSim(q, o, qf.model.Workers, qf.model.Backlog, ch)
	sim.nullFull = qf.null.fullAtAccept
	unitConns := make([][]int, len(d.units))
	var ghosts []int
	for ci := range q.conns {
		if ui := q.conns[ci].unit; ui >= 0 {
			unitConns[ui] = append(unitConns[ui], ci)
		} else {
			ghosts = append(ghosts, ci)
		}
	}
	slices.SortStableFunc(ghosts, func(a, b int) int { return cmpInt64(q.conns[a].synStart, q.conns[b].synStart) })
	// left: a unit's transactions the server has yet to serve.
	left := make([]int, len(d.units))
	for ui := range d.units {
		for _, ci := range unitConns[ui] {
			left[ui] += len(q.conns[ci].txs)
		}
	}
	qd := qf.newDelta()
	var h minheap.Heap[event]
	finish := func(ui int) {
		u, s := &d.units[ui], &st[ui]
		for _, ci := range unitConns[ui] {
			qd.syn[ci] = qf.connDelta(ci, &sim.out, &qf.null)
			for _, ti := range q.conns[ci].txs {
				qd.srv[ti] = qf.txDelta(ti, &sim.out, &qf.null)
			}
		}
		p := s.delay + d.predict(u, &s.act, LoadModel{}, &loadDelta{}, qd, s.delay)
		out[ui] = UnitResult{ID: u.id, Class: u.class, Start: u.start, Measured: u.total, Predicted: p, Delay: s.delay}
		if first := d.firstConn(u); first >= 0 && sim.out.failed[q.txs[first].conn] {
			// The server dropped every SYN the client sent: it gave up.
			s.failed, out[ui].Failed = true, true
		}
		h.Push(event{t: u.start + p, done: true, unit: ui, value: p})
	}
	served := func(ui, n int) {
		if left[ui] -= n; left[ui] == 0 {
			finish(ui)
		}
	}
	sim.onDone = func(ti int) {
		if ti < q.dataTxs {
			served(d.txs[ti].unit, 1)
		}
	}
	sim.onFail = func(ci int) {
		if c := &q.conns[ci]; c.unit >= 0 {
			served(c.unit, len(c.txs)) // its requests never came
		}
	}
	// lastAct: the actions of each class's latest admitted unit, which a
	// client that gave up in the capture would have met.
	lastAct := map[string]active{}
	admit := func(ui, attempt int) {
		u, s := &d.units[ui], &st[ui]
		lastAct[u.class] = s.act
		if s.act.remove && u.container >= 0 {
			for _, ti := range u.txs {
				ch.txsRemoved[ti] = ti != u.container
			}
		}
		first := d.firstConn(u)
		for _, ci := range unitConns[ui] {
			ch.connDelay[ci], ch.connSpliced[ci] = s.delay, s.act.splice
			if q.txs[q.conns[ci].txs[0]].conn == ci && q.conns[ci].txs[0] == first {
				// The connection whose SYNs the rules dropped goes on
				// counting the client's attempts.
				ch.connAttempt[ci] = attempt
			}
			sim.start(ci)
		}
		if left[ui] == 0 {
			finish(ui)
		}
	}
	next, g := 0, 0
	for {
		tu, tg, tr, ts := int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64)
		if next < len(d.units) {
			tu = d.units[next].start
		}
		if g < len(ghosts) {
			tg = q.conns[ghosts[g]].synStart
		}
		if len(h) > 0 {
			tr = h[0].t
		}
		if len(sim.h) > 0 {
			ts = sim.h[0].t
		}
		switch m := min(tu, tg, tr, ts); {
		case m == math.MaxInt64:
			return out, st
		case ts == m:
			// The server first: what completes at an instant is seen by
			// what arrives at it.
			sim.step()
		case tr == m && h[0].done:
			ev := h.Pop()
			r.complete(d.units[ev.unit].class, ev.t, ev.value)
		case tr == m:
			if ev := h.Pop(); r.arrive(ev, out, st, &h) {
				admit(ev.unit, ev.attempt)
			}
		case tg == m:
			ci := ghosts[g]
			g++
			act := lastAct[q.conns[ci].class]
			if ch.connGone[ci], ch.connSpliced[ci] = act.drop, act.splice; !act.drop {
				sim.start(ci)
			}
		default:
			if r.arrive(event{t: tu, unit: next}, out, st, &h) {
				admit(next, 0)
			}
			next++
		}
	}
}
