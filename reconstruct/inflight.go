package reconstruct

import (
	"iter"
	"net/netip"
	"strings"
	"time"
)

// InFlight lists when each transaction of client the tracker has not yet
// delivered began at the capture point: a request not yet answered, a
// response not yet complete, and a first transaction still connecting (its
// SYNs unanswered, or answered so recently that its request may yet
// follow). A pageview stage that saw only delivered transactions would
// close a page while one of its objects is still connecting to an
// overloaded server, seconds of SYN retries later; with this it waits.
//
// The times are capture times; a transaction's Start may be half a round
// trip earlier. Event streams (text/event-stream) never end by design and
// are not listed. It walks the client's open connections only.
func (t *Tracker) InFlight(client netip.Addr) iter.Seq[int64] {
	return func(yield func(int64) bool) {
		if c := t.byClient1.get(client); c != nil {
			t.yieldInFlight(c, yield)
			return
		}
		for _, c := range t.byClient[client] {
			if !t.yieldInFlight(c, yield) {
				return
			}
		}
	}
}

// yieldInFlight yields when c's earliest transaction not delivered began,
// if it has one; false if yield asked to stop.
func (t *Tracker) yieldInFlight(c *conn, yield func(int64) bool) bool {
	if c.is(cfDone) {
		return true
	}
	if since, ok := c.inFlightSince(t.now); ok {
		return yield(since)
	}
	return true
}

// indexClient and unindexClient keep the open connections by client
// address, for InFlight: in Tracker.byClient1 while a client has one (most
// do: no slice and its array for each), in Tracker.byClient, in the order
// they opened but for swaps on removal, while it has more.
func (t *Tracker) indexClient(c *conn) {
	a := c.rec.Client()
	if list, ok := t.byClient[a]; ok {
		c.byClientPos = int32(len(list))
		t.byClient[a] = append(list, c)
		return
	}
	if first := t.byClient1.get(a); first != nil {
		t.byClient1.remove(first)
		c.byClientPos = 1
		t.byClient[a] = []*conn{first, c}
		return
	}
	c.byClientPos = 0
	t.byClient1.put(a, c)
}

func (t *Tracker) unindexClient(c *conn) {
	a := c.rec.Client()
	if t.byClient1.get(a) == c {
		t.byClient1.remove(c)
		return
	}
	list := t.byClient[a]
	if int(c.byClientPos) >= len(list) || list[c.byClientPos] != c {
		return
	}
	last := list[len(list)-1]
	list[c.byClientPos], last.byClientPos = last, c.byClientPos
	list[len(list)-1] = nil
	if list = list[:len(list)-1]; len(list) == 1 {
		delete(t.byClient, a)
		t.byClient1.put(a, list[0]) // its byClientPos is 0 already
		return
	}
	t.byClient[a] = list
}

// inFlightSince is the earliest capture time at which a transaction c has
// not delivered began, if any.
func (c *conn) inFlightSince(now int64) (int64, bool) {
	since, ok := int64(0), false
	note := func(ts int64) {
		if ts > 0 && (!ok || ts < since) {
			since, ok = ts, true
		}
	}
	first := int64(0)
	if len(c.rec.synTimes()) > 0 {
		first = c.rec.synTimes()[0]
	}
	txSince := func(st *txState) {
		if st == nil || strings.HasPrefix(st.tx.contentType(), "text/event-stream") {
			return
		}
		if st.opensConn() && first > 0 {
			// Timed from the first SYN unless the request came well after
			// the connect (a spare connection; see preconnectIdle).
			at, req := c.connectedAt(), st.tx.RequestFirst
			if at == 0 || req == 0 || req-at <= preconnectIdle {
				note(first)
				return
			}
		}
		note(st.tx.RequestFirst)
		note(st.tx.ResponseFirst)
	}
	nextIndex := 0
	if c.flowState != nil { // else no data yet: only the connect is in flight
		for _, st := range c.pending() {
			txSince(st)
		}
		txSince(c.resp)
		for _, st := range c.awaiting() {
			txSince(st)
		}
		nextIndex = int(c.nextIndex)
	}
	if nextIndex == 0 && first > 0 {
		// No request yet: one that follows the connect at once is timed from
		// the first SYN; after preconnectIdle the connection is a spare
		// one and its first request starts when it is sent. A connect
		// whose SYNs stopped long ago was given up: the tracker keeps it
		// until IdleTimeout, but no transaction will come of it.
		at := c.connectedAt()
		if at == 0 && now-c.rec.synTimes()[len(c.rec.synTimes())-1] <= nextSYNWithin(c.rec.synTimes()) || at > 0 && now-at <= preconnectIdle {
			note(first)
		}
	}
	return since, ok
}

// nextSYNWithin is how long after its latest SYN a client still
// connecting sends the next one, at most: twice the last gap (stacks
// double it; Linux's linear timeouts keep it), at least 3 s (the initial
// timeout of older stacks), plus a second for a loaded client.
func nextSYNWithin(syns []int64) int64 {
	gap := int64(3 * time.Second)
	if n := len(syns); n > 1 {
		gap = max(gap, 2*(syns[n-1]-syns[n-2]))
	}
	return gap + int64(time.Second)
}
