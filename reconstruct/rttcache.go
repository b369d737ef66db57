package reconstruct

import (
	"net/netip"
	"time"
)

// A Linux client remembers each destination's smoothed RTT when a
// connection to it closes (tcp_update_metrics, on the ACK of its FIN) and
// starts the next connection's retransmission timeout from it when that is
// longer than the handshake's sample (tcp_init_metrics: RTO = crtt +
// max(2 crtt, RTO_MIN), until the first data sample). A request lost on a
// fresh connection therefore waits by the history of the earlier ones.
// rttCache keeps that history as the tracker saw it, per client and server
// address (the kernel keys its metrics by both), for an hour
// (TCP_METRICS_TIMEOUT).
type rttCache struct {
	entries map[addrPair]cachedRTT
	limit   int
}

type addrPair struct{ client, server netip.Addr }

type cachedRTT struct {
	srtt int64 // scaled x8, as the kernel keeps it
	at   int64 // capture time of the last update
}

const linuxMetricsTimeout = int64(time.Hour)

// save merges a closing connection's smoothed RTT (scaled x8) as
// tcp_update_metrics does: a longer one replaces the cached value, a
// shorter one pulls it down by an eighth of the difference.
func (r *rttCache) save(k addrPair, srtt, now int64) {
	if srtt <= 0 {
		return
	}
	if r.entries == nil {
		r.entries = make(map[addrPair]cachedRTT)
	}
	old, ok := r.entries[k]
	if ok && now-old.at <= linuxMetricsTimeout {
		if m := old.srtt - srtt; m > 0 {
			srtt = old.srtt - m>>3
		}
	} else if len(r.entries) >= r.limit {
		r.evict(now)
	}
	r.entries[k] = cachedRTT{srtt: srtt, at: now}
}

// initialRTO is the timeout a new connection starts with, given its
// handshake sample in t: 0 when the cache does not raise it.
func (r *rttCache) initialRTO(k addrPair, t *clientTimer, now int64) int64 {
	e, ok := r.entries[k]
	if !ok || now-e.at > linuxMetricsTimeout || e.srtt <= t.srtt {
		return 0
	}
	crtt := e.srtt >> 3
	return crtt + max(2*crtt, linuxRTOMin)
}

// evict makes room: expired entries first, else any one (the table is a
// bound, not a promise).
func (r *rttCache) evict(now int64) {
	for k, e := range r.entries {
		if now-e.at > linuxMetricsTimeout {
			delete(r.entries, k)
		}
	}
	for k := range r.entries {
		if len(r.entries) < r.limit {
			return
		}
		delete(r.entries, k)
	}
}
