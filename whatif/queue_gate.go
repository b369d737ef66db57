package whatif

// A pageview's embedded objects follow its container in the replay: the
// client asks for them only once it has the container's response, so a
// replay that serves the container later (or sooner) brings their load
// to the server later (or sooner) too.

// gate holds connection ci until container transaction cont leaves the
// server (release).
func (s *queueSim) gate(ci, cont int) {
	if s.gated == nil {
		s.gated = map[int][]int{}
	}
	s.gated[cont] = append(s.gated[cont], ci)
}

// release starts at t the connections that waited for container
// transaction ti, delta later than captured: as much later as the
// container left the server than in the null replay.
func (s *queueSim) release(ti int, t, delta int64) {
	cs := s.gated[ti]
	if len(cs) == 0 {
		return
	}
	delete(s.gated, ti)
	for _, ci := range cs {
		c := &s.q.conns[ci]
		s.shift[ci] = delta
		if !c.fresh {
			s.scheduleNext(ci, t)
			continue
		}
		s.h.Push(qEvent{t: max(c.synStart+delta, t), kind: qSYN, id: ci, n: s.ch.connAttempt[ci]})
	}
}

// gateOf is the container transaction that connection ci of unit ui
// waits for in the replay (-1: none): a connection other than the
// container's, whose first request the client made after the container's
// response had ended (as the pageview's critical path has it, see
// predict).
func (l *closedLoop) gateOf(ui, ci int) int {
	d, q := l.d, l.q
	u, c := &d.units[ui], &q.conns[ci]
	if u.container < 0 || len(c.txs) == 0 || c.txs[0] >= q.dataTxs || q.txs[u.container].conn == ci {
		return -1
	}
	if l.qf.null.doneAt[u.container] == 0 || d.txs[c.txs[0]].tx.Start < d.txs[u.container].tx.End {
		return -1
	}
	return u.container
}
