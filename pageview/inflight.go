package pageview

import (
	"cmp"
	"iter"
	"net/netip"
	"slices"
	"time"
)

// InFlightSource lists, per client address, when each transaction not yet
// delivered to the Grouper began (capture time): reconstruct.Tracker's
// InFlight.
type InFlightSource interface {
	InFlight() iter.Seq2[netip.Addr, int64]
}

// WatchInFlight makes the Grouper keep a pageview open past its idle gap
// while its client has a transaction in flight that began within the page
// (from the container's Start to IdleGap past its latest End): an object
// whose connection spends seconds retrying SYNs into an overloaded server,
// or waiting in its queue, reaches the Grouper only when complete, long
// after the page would have gone idle. A page waits at most InFlightWait
// from the transaction's start. Call it before the first record, with the
// tracker that feeds the Grouper.
func (g *Grouper) WatchInFlight(src InFlightSource) { g.inflight.src = src }

// inFlightRescan is how stale, in packet time, the list of transactions in
// flight may be. A pageview is due to close only when packet time is past
// its end plus Settle plus IdleGap, so a transaction that began after the
// last scan began too late to join it.
const inFlightRescan = int64(250 * time.Millisecond)

type inFlightEntry struct {
	addr  netip.Addr
	since int64
}

// inFlightView is the Grouper's copy of the tracker's transactions in
// flight, sorted by address then start, rebuilt at most every
// inFlightRescan of packet time and only when a pageview is due to close.
type inFlightView struct {
	src     InFlightSource
	scanned bool
	at      int64
	entries []inFlightEntry
}

// awaitsInFlight reports whether p must stay open for a transaction of its
// client still in flight.
func (g *Grouper) awaitsInFlight(p *pv) bool {
	v := &g.inflight
	if v.src == nil {
		return false
	}
	if !v.scanned || g.now-v.at >= inFlightRescan {
		v.scan(g.now - int64(g.cfg.InFlightWait))
		v.scanned, v.at = true, g.now
	}
	addr := p.c.key.addr
	i, _ := slices.BinarySearchFunc(v.entries, inFlightEntry{addr, p.rec.Start}, compareInFlight)
	if i < len(v.entries) && v.entries[i].addr == addr && v.entries[i].since <= p.end+int64(g.cfg.IdleGap) {
		if !p.awaited {
			p.awaited = true
			g.stats.AwaitedInFlight++
		}
		return true
	}
	return false
}

// scan rebuilds the list from the source, leaving out what began before
// oldest (waited for long enough).
func (v *inFlightView) scan(oldest int64) {
	v.entries = v.entries[:0]
	for addr, since := range v.src.InFlight() {
		if since >= oldest {
			v.entries = append(v.entries, inFlightEntry{addr, since})
		}
	}
	slices.SortFunc(v.entries, compareInFlight)
	if cap(v.entries) > 1024 && len(v.entries) < cap(v.entries)/4 {
		v.entries = slices.Clone(v.entries) // a burst of connections passed: do not keep its peak
	}
}

func compareInFlight(a, b inFlightEntry) int {
	if c := a.addr.Compare(b.addr); c != 0 {
		return c
	}
	return cmp.Compare(a.since, b.since)
}
