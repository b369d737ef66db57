package pageview

import (
	"iter"
	"net/netip"
	"time"
)

// InFlightSource lists when each transaction of a client not yet
// delivered to the Grouper began (capture time): reconstruct.Tracker's
// InFlight.
type InFlightSource interface {
	InFlight(client netip.Addr) iter.Seq[int64]
}

// WatchInFlight makes the Grouper keep a pageview open past its idle gap
// while its client has a transaction in flight that began within the page
// (from the container's Start to IdleGap past its latest End): an object
// whose connection spends seconds retrying SYNs into an overloaded server,
// or waiting in its queue, reaches the Grouper only when complete, long
// after the page would have gone idle. A page waits at most InFlightWait
// from the transaction's start. Call it before the first record, with the
// tracker that feeds the Grouper.
func (g *Grouper) WatchInFlight(src InFlightSource) { g.inflight = src }

// inFlightRecheck is how long, in packet time, a pageview found waiting
// waits before its client's connections are looked at again. A pageview
// is due to close only when packet time is past its end plus IdleGap plus
// Settle (2 s by default), so a transaction that began after the last look
// began too late to join it (the recheck is never longer than Settle).
const inFlightRecheck = int64(time.Second)

// awaitsInFlight reports whether p must stay open for a transaction of its
// client still in flight.
func (g *Grouper) awaitsInFlight(p *pv) bool {
	if g.inflight == nil {
		return false
	}
	if p.awaited && g.now-p.inflightAt < min(inFlightRecheck, g.settle) {
		return true
	}
	oldest := g.now - int64(g.cfg.InFlightWait)
	last := p.end + int64(g.cfg.IdleGap)
	for since := range g.inflight.InFlight(p.c.key.addr) {
		if since >= p.rec.Start && since <= last && since >= oldest {
			if !p.awaited {
				p.awaited = true
				g.stats.AwaitedInFlight++
			}
			p.inflightAt = g.now
			return true
		}
	}
	p.awaited = false
	return false
}
