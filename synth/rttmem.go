package synth

import (
	"cmp"
	"net/netip"
	"slices"
	"time"
)

// Linux clients remember each destination's smoothed RTT: when a
// connection closes (the ACK of the client's FIN arrives) tcp_update_metrics
// stores it, raising the stored value at once or lowering it by an eighth
// of the difference; a new connection to the same destination whose
// handshake sample is shorter starts with RTO = crtt + max(2 crtt, 200 ms)
// instead (tcp_init_metrics), until its first data sample. Entries expire
// after an hour. The workload plans connections ahead of time, so closes
// are recorded with their time and folded in when a later handshake asks.
type rttMemory struct {
	srtt    int64 // ns; 0: none
	at      int64
	pending []memUpdate
}

type memUpdate struct{ at, srtt int64 }

const metricsTimeout = int64(time.Hour)

type destKey struct{ client, server netip.Addr }

// remember records a close at client time at with the connection's srtt.
func (g *gen) remember(k destKey, at, srtt int64) {
	if srtt <= 0 {
		return
	}
	if g.mem == nil {
		g.mem = make(map[destKey]*rttMemory)
	}
	m := g.mem[k]
	if m == nil {
		m = &rttMemory{}
		g.mem[k] = m
	}
	m.pending = append(m.pending, memUpdate{at, srtt})
}

// recalled is the cached srtt a handshake completing at client time now
// finds (0: none).
func (g *gen) recalled(k destKey, now int64) int64 {
	m := g.mem[k]
	if m == nil {
		return 0
	}
	slices.SortFunc(m.pending, func(a, b memUpdate) int { return cmp.Compare(a.at, b.at) })
	n := 0
	for _, u := range m.pending {
		if u.at > now {
			break
		}
		n++
		switch {
		case m.srtt == 0 || u.at-m.at > metricsTimeout || u.srtt >= m.srtt:
			m.srtt = u.srtt
		default:
			m.srtt -= (m.srtt - u.srtt) / 8
		}
		m.at = u.at
	}
	m.pending = m.pending[n:]
	if m.srtt == 0 || now-m.at > metricsTimeout {
		return 0
	}
	return m.srtt
}
