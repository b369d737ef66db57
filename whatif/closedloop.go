package whatif

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"

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
// The replay with seed 0 moves no timer; another seed moves each timer
// the model sets on its own (see Options.Members) by up to ±1 ms. It
// reports whether the rules ran the model free (ranFree) and whether the
// front end sent FAST SYN copies (the replays worth pooling: see
// Evaluate).
func (d *Dataset) replayQueue(rules []Rule, o *Options, qf *queueFit, seed uint64) ([]UnitResult, []unitState, bool, bool) {
	l := d.newClosedLoop(rules, o, qf)
	if seed != 0 {
		l.sim.jitter = rand.New(rand.NewPCG(seed, memberStream))
	}
	l.run()
	return l.out, l.st, l.ranFree(), l.sim.copies > 0
}

// memberStream is the second word of the members' random sources.
const memberStream = 0x7274_6d6f_6e // "rtmon"

// memberJitter is how far a member moves a timer the model sets: far
// below any timer's own scale, enough to draw another of the replay's
// chaotic outcomes (±1, ±4 and ±10 ms pooled gave errors alike on the
// overload pairs).
const memberJitter = int64(time.Millisecond)

// ranFree: the replay took some connection's SYNs out of the capture's
// hands (a splicer's, or FAST SYN's copies) and a backlog is modelled to
// drop them, so what it predicts rests on the model running free.
func (l *closedLoop) ranFree() bool {
	if l.qf.model.Backlog == 0 {
		return false // no SYN is the model's to drop
	}
	for ci := range l.q.conns {
		if l.q.conns[ci].fresh && (l.ch.connSpliced[ci] || l.ch.connFastSYN[ci] > 0) {
			return true
		}
	}
	return false
}

// closedLoop is the state of one replayQueue run.
type closedLoop struct {
	d   *Dataset
	q   *queueData
	qf  *queueFit
	r   *replayer
	out []UnitResult
	st  []unitState
	ch  *queueChange
	sim *queueSim
	qd  *queueDelta
	h   minheap.Heap[event] // the rule engine's arrivals and completions
	// unitConns: each unit's connections; ghosts: the connections of no
	// unit (SYNs that never became a request), by first SYN.
	unitConns [][]int
	ghosts    []int
	// left: a unit's transactions the server has yet to serve.
	left []int
	// lastAct: the actions of each class's latest admitted unit, which a
	// client that gave up in the capture would have met.
	lastAct map[string]active
}

func (d *Dataset) newClosedLoop(rules []Rule, o *Options, qf *queueFit) *closedLoop {
	q := qf.data
	l := &closedLoop{d: d, q: q, qf: qf, r: &replayer{d: d, o: o, rules: rules, windows: map[string]*window{}},
		out: make([]UnitResult, len(d.units)), st: make([]unitState, len(d.units)),
		unitConns: make([][]int, len(d.units)), left: make([]int, len(d.units)), lastAct: map[string]active{}}
	l.ch = &queueChange{connDelay: make([]int64, len(q.conns)), connGone: make([]bool, len(q.conns)),
		connSpliced: make([]bool, len(q.conns)), connBindsAtHello: make([]bool, len(q.conns)), connFastSYN: make([]int64, len(q.conns)), connAttempt: make([]int, len(q.conns)),
		txsRemoved: make([]bool, len(q.txs))}
	l.sim = d.newQueueSim(q, o, qf.model.shape(), l.ch)
	l.sim.nullQueue, l.sim.nullDropQueue, l.sim.nullDone = qf.null.queueAtAccept, qf.null.queueAtDrop, qf.null.doneAt
	l.sim.nullCopyQueue = qf.null.queueAtCopy
	for ci := range q.conns {
		if ui := q.conns[ci].unit; ui >= 0 {
			l.unitConns[ui] = append(l.unitConns[ui], ci)
			l.left[ui] += len(q.conns[ci].txs)
		} else {
			l.ghosts = append(l.ghosts, ci)
		}
	}
	slices.SortStableFunc(l.ghosts, func(a, b int) int { return cmpInt64(q.conns[a].synStart, q.conns[b].synStart) })
	l.qd = qf.newDelta()
	l.sim.onDone = func(ti int) {
		if ti < q.dataTxs {
			l.served(d.txs[ti].unit, 1)
		}
	}
	l.sim.onFail = func(ci int) {
		if c := &q.conns[ci]; c.unit >= 0 {
			l.served(c.unit, len(c.txs)) // its requests never came
		}
	}
	return l
}

// finish predicts unit ui's time from what the simulation did to its
// connections, and schedules its completion for the rules' windows.
func (l *closedLoop) finish(ui int) {
	d, q, qf := l.d, l.q, l.qf
	u, s := &d.units[ui], &l.st[ui]
	for _, ci := range l.unitConns[ui] {
		l.qd.syn[ci] = qf.connDelta(ci, &l.sim.out, &qf.null)
		for _, ti := range q.conns[ci].txs {
			l.qd.srv[ti] = qf.txDelta(ti, &l.sim.out, &qf.null)
		}
	}
	for _, ci := range l.unitConns[ui] {
		for _, ti := range q.conns[ci].txs {
			if ti < q.dataTxs && q.txs[ti].unexplained {
				l.qd.srv[ti] = l.unexplainedDelta(ui, ti)
			}
		}
	}
	p, failed := l.gaveUp(ui)
	if !failed {
		p = s.delay + d.predict(u, &s.act, LoadModel{}, &loadDelta{}, l.qd, s.delay)
	}
	l.out[ui] = UnitResult{ID: u.id, Class: u.class, Start: u.start, Measured: u.total, Predicted: p, Delay: s.delay, Failed: failed}
	s.failed = s.failed || failed
	l.h.Push(l.r.completion(ui, u.start+p, p))
}

// gaveUp reports whether the server dropped every SYN of unit ui's first
// connection, and if so when, from the unit's start, its client gave up:
// then, having asked for nothing else. (Predicted along the pageview's
// critical path, its embedded objects came after the failed container:
// 8-12 s where the real clients gave up at 7.1 s.)
func (l *closedLoop) gaveUp(ui int) (int64, bool) {
	u, q := &l.d.units[ui], l.q
	first := l.d.firstConn(u)
	if first < 0 || !l.sim.out.failed[q.txs[first].conn] {
		return 0, false
	}
	fc := q.txs[first].conn
	return l.st[ui].delay + max(q.conns[fc].synStart-u.start, 0) + l.sim.out.synWait[fc], true
}

// unexplainedDelta is the change of server time of ti, a response the
// pool cannot explain (it passed through the replay as measured): its
// queueing, what it waited beyond its service, shrinks as its unit's
// other responses' queueing did from the null replay to this one, and
// grows by their mean growth.
// Kept as measured, one such response held a high-class pageview at
// 1.96 s where the low class's load was gone and its siblings took
// 200-400 ms. A unit with nothing to compare keeps the measurement.
func (l *closedLoop) unexplainedDelta(ui, ti int) int64 {
	q, qf := l.q, l.qf
	var nullWait, nowWait, siblings int64
	for _, ci := range l.unitConns[ui] {
		for _, tj := range q.conns[ci].txs {
			sib := &q.txs[tj]
			if tj >= q.dataTxs || sib.unexplained || qf.null.server[tj] < 0 || l.sim.out.server[tj] < 0 {
				continue
			}
			nullWait += max(qf.null.server[tj]-sib.service, 0)
			nowWait += max(l.sim.out.server[tj]-sib.service, 0)
			siblings++
		}
	}
	qt := &q.txs[ti]
	wait := qt.measured - qt.service
	if nullWait <= 0 || nowWait == nullWait || wait <= 0 || l.sim.out.server[ti] < 0 {
		return qf.txDelta(ti, &l.sim.out, &qf.null)
	}
	if nowWait > nullWait {
		// A busier server: it waits as much longer as its siblings did,
		// on average. In proportion, a half-open wait of 3.7 s beside
		// siblings whose 150 ms of queueing became 1,047 ms under SPLICE
		// grew to 25.9 s, where the page really took 5.6 s at most.
		return (nowWait - nullWait) / siblings
	}
	scaled := float64(wait) * (float64(nowWait) / float64(nullWait))
	return int64(math.Round(scaled)) - wait
}

func (l *closedLoop) served(ui, n int) {
	if l.left[ui] -= n; l.left[ui] == 0 {
		l.finish(ui)
	}
}

// admit hands an admitted unit's connections to the server, with the
// actions the rules chose for it.
func (l *closedLoop) admit(ui, attempt int) {
	d, q, ch := l.d, l.q, l.ch
	u, s := &d.units[ui], &l.st[ui]
	l.lastAct[u.class] = s.act
	if s.act.remove && u.container >= 0 {
		for _, ti := range u.txs {
			ch.txsRemoved[ti] = ti != u.container
		}
	}
	first := d.firstConn(u)
	for _, ci := range l.unitConns[ui] {
		ch.connDelay[ci], ch.connSpliced[ci], ch.connFastSYN[ci] = s.delay, s.act.splice, s.act.fastSYNGap()
		ch.connBindsAtHello[ci] = s.act.splice && !s.act.spliceTLS
		if q.txs[q.conns[ci].txs[0]].conn == ci && q.conns[ci].txs[0] == first {
			// The connection whose SYNs the rules dropped goes on
			// counting the client's attempts.
			ch.connAttempt[ci] = attempt
		}
		if cont := l.gateOf(ui, ci); cont >= 0 {
			l.sim.gate(ci, cont)
			continue
		}
		l.sim.start(ci)
	}
	if l.left[ui] == 0 {
		l.finish(ui)
	}
}

// ghost replays a connection of no unit as its class's latest actions
// would have met it.
func (l *closedLoop) ghost(ci int) {
	act := l.lastAct[l.q.conns[ci].class]
	l.ch.connFastSYN[ci] = act.fastSYNGap()
	l.ch.connBindsAtHello[ci] = act.splice && !act.spliceTLS
	if l.ch.connGone[ci], l.ch.connSpliced[ci] = act.drop, act.splice; !act.drop {
		l.sim.start(ci)
	}
}

// run takes the earliest of the four event sources until all are done.
func (l *closedLoop) run() {
	d, sim := l.d, l.sim
	next, g := 0, 0
	for {
		tu, tg, tr, ts := int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64)
		if next < len(d.units) {
			tu = d.units[next].start
		}
		if g < len(l.ghosts) {
			tg = l.q.conns[l.ghosts[g]].synStart
		}
		if len(l.h) > 0 {
			tr = l.h[0].t
		}
		if len(sim.h) > 0 {
			ts = sim.h[0].t
		}
		switch m := min(tu, tg, tr, ts); {
		case m == math.MaxInt64:
			return
		case ts == m:
			// The server first: what completes at an instant is seen by
			// what arrives at it.
			sim.step()
		case tr == m && l.h[0].done:
			ev := l.h.Pop()
			l.r.complete(d.units[ev.unit].class, ev)
		case tr == m:
			if ev := l.h.Pop(); l.r.arrive(ev, l.out, l.st, &l.h) {
				l.admit(ev.unit, ev.attempt)
			}
		case tg == m:
			l.ghost(l.ghosts[g])
			g++
		default:
			if l.r.arrive(event{t: tu, unit: next}, l.out, l.st, &l.h) {
				l.admit(next, 0)
			}
			next++
		}
	}
}
