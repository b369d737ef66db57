package synth

import "time"

// Linux's retransmission timer constants (include/net/tcp.h).
const (
	rtoMax     = 120 * time.Second    // TCP_RTO_MAX
	timeoutMin = 2 * time.Millisecond // TCP_TIMEOUT_MIN: 2 jiffies at HZ=1000
	// maxCopies bounds the transmissions of one segment (or the server's
	// probes of one tail); the last is never lost, so every exchange ends.
	maxCopies = 5
)

// rtoEst is one Linux sender's round-trip estimator and retransmission
// timeout (tcp_rtt_estimator, tcp_set_rto), in ns. mdev, mdevMax and rttvar
// are kept as Linux keeps them, four times the mean deviation, so the
// timeout is srtt + rttvar.
type rtoEst struct {
	srtt, mdev, mdevMax, rttvar int64
	minRTT                      int64
	// rttSeq ends the current window of data: rttvar decays towards the
	// window's largest deviation once per window, not per sample.
	rttSeq uint32
	// initRTO is a fresh connection's timeout from the destination's
	// remembered RTT (rttMemory), until the next sample.
	initRTO int64
}

// sample feeds one RTT measurement m taken when the ACK reached una (the
// sender's sequence numbers) with nxt sent.
func (e *rtoEst) sample(m int64, una, nxt uint32) {
	m = max(m, 1)
	e.initRTO = 0
	if e.minRTT == 0 || m < e.minRTT {
		e.minRTT = m
	}
	if e.srtt == 0 {
		// The first sample: RTO = m + max(2m, RTO_MIN), "rto = 3*rtt".
		e.srtt, e.mdev = m, 2*m
		e.rttvar = max(e.mdev, int64(minRTO))
		e.mdevMax, e.rttSeq = e.rttvar, nxt
		return
	}
	err := m - e.srtt
	e.srtt += err / 8
	if err < 0 {
		// A sample below srtt moves mdev only by 1/32 when it is larger
		// than the deviation, so a sudden short RTT cannot inflate it.
		err = -err - e.mdev/4
		if err > 0 {
			err /= 8
		}
	} else {
		err -= e.mdev / 4
	}
	e.mdev += err
	if e.mdev > e.mdevMax {
		e.mdevMax = e.mdev
		e.rttvar = max(e.rttvar, e.mdevMax)
	}
	if int32(una-e.rttSeq) > 0 {
		if e.mdevMax < e.rttvar {
			e.rttvar -= (e.rttvar - e.mdevMax) / 4
		}
		e.rttSeq, e.mdevMax = nxt, int64(minRTO)
	}
}

// rto is the retransmission timeout before any backoff.
func (e *rtoEst) rto() int64 {
	if e.initRTO > 0 {
		return e.initRTO
	}
	return min(e.srtt+e.rttvar, int64(rtoMax))
}

// backedOff is the timeout after n consecutive expiries (each doubles it).
func (e *rtoEst) backedOff(n int) int64 {
	r := e.rto()
	for range n {
		r = min(2*r, int64(rtoMax))
	}
	return r
}

// probeTimeout is when a tail loss probe fires after the last transmission
// with outstanding segments in flight (tcp_schedule_loss_probe): two smoothed
// RTTs plus room for a delayed ACK when one segment is out, never later than
// the retransmission timeout.
func (e *rtoEst) probeTimeout(outstanding int) int64 {
	pto := 2 * e.srtt
	if outstanding == 1 {
		pto += int64(minRTO)
	} else {
		pto += int64(timeoutMin)
	}
	return min(pto, e.rto())
}

// Linux's timer wheel at 250 Hz (Debian's kernels): a timer fires on a
// jiffy, and one set more than 63 jiffies ahead only on the boundary of its
// wheel level's granularity (8 jiffies up to 511, 64 up to 4095, ...): late,
// never early, by how much depending on the wheel's clock.
const jiffy = int64(4 * time.Millisecond)

// TimerFires is fire for scripts outside the package: when a Linux client's
// timer set at now for d goes off.
func TimerFires(now, d int64) int64 { return fire(now, d) }

// fire is when a timer set at now to expire d later goes off
// (calc_wheel_index: the expiry in jiffies, plus a granule, rounded down to
// the granule).
func fire(now, d int64) int64 {
	exp := (now + d + jiffy - 1) / jiffy
	gran := int64(1)
	for j := d / jiffy; j >= 64; j >>= 3 {
		gran <<= 3
	}
	if gran > 1 {
		exp = (exp + gran) / gran * gran
	}
	return exp * jiffy
}
