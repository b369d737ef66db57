package pageview

import (
	"cmp"
	"slices"

	"github.com/rtmon/rtmon/reconstruct"
)

// CriticalPath attributes [start, end) to connect, server, transfer and other
// time along the critical path of a pageview's transactions, so that
// tconn+tserver+ttransfer+tother == end-start exactly.
//
// Walking back from t = end: among the transactions that started before t,
// take the one whose End is latest, capped at t (the one that was running
// last before t, or else the one whose completion came last before t: the
// predecessor that gated what followed). The gap between its capped End and
// t is other time (the client parsing, or idle); its own time from its Start
// to the capped End is split along its phases in order (connect, request,
// server, transfer; request upload counts as other), cut where the cap falls.
// Then t moves to its Start, until t reaches start; time before the first
// transaction is other. Ties on End go to the transaction that started first.
func CriticalPath(members []*reconstruct.Transaction, start, end int64) (tconn, tserver, ttransfer, tother int64) {
	n := len(members)
	if n == 0 || end <= start {
		return 0, 0, 0, max(end-start, 0)
	}
	byStart := ByStart(members)
	// best[i]: index of the latest-ending transaction among byStart[:i+1].
	best := make([]int, n)
	for i := range byStart {
		best[i] = i
		if i > 0 && byStart[best[i-1]].End >= byStart[i].End {
			best[i] = best[i-1]
		}
	}
	t, k := end, n
	for t > start {
		for k > 0 && byStart[k-1].Start >= t {
			k--
		}
		if k == 0 {
			tother += t - start
			break
		}
		p := byStart[best[k-1]]
		s := max(p.Start, start)
		e := max(min(p.End, t), s)
		tother += t - e
		rest := e - s
		take := func(v int64) int64 {
			v = min(max(v, 0), rest)
			rest -= v
			return v
		}
		tconn += take(p.Tconn) + take(p.Ttls) // setting up the connection, TLS included
		tother += take(p.Trequest)
		tserver += take(p.Tserver)
		ttransfer += take(p.Ttransfer)
		tother += rest // components short of End-Start (inconsistent record)
		t = s
	}
	return tconn, tserver, ttransfer, tother
}

// ByStart returns a copy of txs in Start order, ties in their given order:
// the order of a waterfall (HAR) and of the critical-path walk.
func ByStart(txs []*reconstruct.Transaction) []*reconstruct.Transaction {
	sorted := slices.Clone(txs)
	sortByStart(sorted)
	return sorted
}

func sortByStart(txs []*reconstruct.Transaction) {
	slices.SortStableFunc(txs, func(a, b *reconstruct.Transaction) int { return cmp.Compare(a.Start, b.Start) })
}
