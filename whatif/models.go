package whatif

import (
	"math"

	"github.com/rtmon/rtmon/reconstruct"
)

// active is the set of actions that apply to one unit at its admission.
// When several matching rules name the same action, the first rule wins.
type active struct {
	fastSYN    int64 // gap in ns; 0 = off
	fastSYNACK int64
	splice     bool
	spliceTLS  bool // the splicer terminates TLS (binds at the request on HTTPS too)
	drop       bool
	halt       bool
	remove     bool
	rewrite    bool
	above      int64
	ratio      float64
	any        bool
}

// fastSYNGap is the FAST SYN gap that applies (0: none, or halted).
func (a *active) fastSYNGap() int64 {
	if a.halt {
		return 0
	}
	return a.fastSYN
}

func (a *active) add(x Action) {
	a.any = true
	switch x.Kind {
	case FastSYN:
		if a.fastSYN == 0 {
			a.fastSYN = int64(x.Gap)
		}
	case FastSYNACK:
		if a.fastSYNACK == 0 {
			a.fastSYNACK = int64(x.Gap)
		}
	case Splice:
		if !a.splice {
			a.splice, a.spliceTLS = true, x.TerminateTLS
		}
	case DropSYN:
		a.drop = true
	case HaltFastSYN:
		a.halt = true
	case RemoveEmbeds:
		a.remove = true
	case RewriteEmbeds:
		if !a.rewrite {
			a.rewrite, a.above, a.ratio = true, x.Above, x.Ratio
		}
	}
}

// fastSave is the time saved when each wait shrinks to gap: the FAST SYN and
// FAST SYN/ACK model. Assumption: the front end's retransmission after gap
// succeeds exactly when the client's later one did (the number of attempts
// is unchanged); a wait already shorter than gap is kept.
func fastSave(waits []int64, gap int64) int64 {
	var s int64
	for _, w := range waits {
		if w > gap {
			s += w - gap
		}
	}
	return s
}

// slowStartRounds is the round trips slow start takes to send n segments
// from a window of w, the window doubling each round (an ACK per segment,
// as a client in quick-ACK mode at a connection's start sends them).
func slowStartRounds(n, w int64) int64 {
	var r int64
	for sent := int64(0); sent < n; r++ {
		sent += w
		w *= 2
	}
	return r
}

// responseMSS is the response payload per segment: the client's MSS, or
// defaultMSS when the capture missed it.
func responseMSS(c *reconstruct.Connection) int64 {
	if c != nil && c.MSSClient > 0 {
		return int64(c.MSSClient)
	}
	return defaultMSS
}

// restartSave is the transfer time FAST SYN/ACK saves a fresh connection's
// first response besides the handshake wait. A server that retransmitted
// its SYN/ACK more than once starts the transfer with a window of one
// segment (RFC 5681 3.1; Linux tcp_init_transfer, which forgives a single
// retransmission since RFC 6298's 1 s initial RTO); the appliance's copy,
// answered before the server's timer fires again, spares those
// retransmissions, so the response leaves at the initial window. The
// saving is the rounds that window spares at the client's RTT, at most
// the measured transfer time. The server's timer backs off (T, then 2T
// more), so the copy spares the second retransmission when the client's
// ACK to it arrives within 3T of the first SYN/ACK.
func restartSave(ti *txInfo, gap int64) int64 {
	c, t := ti.conn, ti.tx
	a := c.SYNACKTimes
	if !ti.fresh || len(a) < 3 || (c.Established > 0 && a[2] > c.Established) {
		return 0
	}
	if timer := a[1] - a[0]; timer <= 0 || gap+c.RTTClient+c.RTTServer >= 3*timer {
		return 0
	}
	seg := responseMSS(c)
	n := (t.ResponseBytes + seg - 1) / seg
	rounds := slowStartRounds(n, 1) - slowStartRounds(n, initCwnd)
	return min(rounds*t.RTTClient, t.Ttransfer)
}

// connEffect is the change a fresh connection's first transaction sees:
// time saved (connect, and transfer for FAST SYN/ACK) and server time added. SPLICE (see its Assumptions):
// the client's connect time becomes its RTT plus the SYN/ACK waits it still
// suffers; the splicer connects to the server when the request has come,
// meeting the SYN waits the client met (less the FAST SYN saving), and the
// request waits for that handshake.
func connEffect(ti *txInfo, a *active) (tconnSave, serverAdd int64) {
	c, t := ti.conn, ti.tx
	syn, synack := reconstruct.HandshakeWaits(c)
	var synSave, ackSave int64
	if gap := a.fastSYNGap(); gap > 0 {
		synSave = fastSave(syn, gap)
	}
	var windowSave int64
	if a.fastSYNACK > 0 {
		ackSave = fastSave(synack, a.fastSYNACK)
		windowSave = restartSave(ti, a.fastSYNACK)
	}
	tconnSave = synSave + ackSave
	if !a.splice {
		return min(tconnSave, t.Tconn) + windowSave, 0
	}
	var synackLeft, synWait int64
	for _, w := range synack {
		synackLeft += w
	}
	for _, w := range syn {
		synWait += w
	}
	synackLeft -= ackSave
	spliced := t.RTTClient + synackLeft
	if spliced < t.Tconn-tconnSave {
		tconnSave = t.Tconn - spliced
	}
	tconnSave = min(tconnSave, t.Tconn)
	// Delayed binding: the splicer connects to the server once the request
	// has come, and the request waits for that handshake, with the SYN
	// waits the server still causes (the testbed's splicer, run against
	// the server that dropped the clients' first SYNs, gave its clients no
	// gain; starting the server handshake at the client's first SYN
	// predicted one client RTT, 5%, too fast).
	serverAdd = max(synWait-synSave, 0) + c.RTTServer
	return tconnSave + windowSave, serverAdd
}

// Slow-start transfer model parameters.
const (
	initCwnd   = 10
	defaultMSS = 1460
)

// slowStart returns the time from the first to the last byte of a response of
// n bytes leaving the server: initial window 10 segments, doubling every RTT
// while the window carries less than rate*RTT bytes, then sending at rate
// (bytes/s; 0 = unlimited). Losses are not modelled.
func slowStart(n int64, mss int64, rtt int64, rate float64) float64 {
	if n <= 0 {
		return 0
	}
	segs := (n + mss - 1) / mss
	cwnd, sent, t := int64(initCwnd), int64(0), 0.0
	for sent < segs {
		if rate > 0 && float64(cwnd*mss) >= rate*float64(rtt)/1e9 {
			return t + float64((segs-sent)*mss)/rate*1e9
		}
		sent += min(cwnd, segs-sent)
		if sent < segs {
			t += float64(rtt)
		}
		cwnd *= 2
	}
	return t
}

// fitRate finds the bottleneck rate (bytes/s) under which slowStart
// reproduces the measured transfer time; 0 (unlimited) when the measurement
// is no slower than pure slow start.
func fitRate(n, mss, rtt int64, measured float64) float64 {
	if measured <= slowStart(n, mss, rtt, 0) {
		return 0
	}
	lo, hi := 0.0, 40.0 // log2 of the rate: 1 B/s .. 1 TB/s
	for range 60 {
		mid := (lo + hi) / 2
		if slowStart(n, mss, rtt, math.Exp2(mid)) > measured {
			lo = mid
		} else {
			hi = mid
		}
	}
	return math.Exp2(hi)
}

// rewriteSave is the transfer time saved when an object's body shrinks to
// ratio of its size (the REWRITE EMBEDS model); at most the measured transfer.
func rewriteSave(ti *txInfo, ratio float64) int64 {
	t := ti.tx
	mss := responseMSS(ti.conn)
	old := t.ResponseBytes
	if old < t.BodyBytes {
		old = t.BodyBytes
	}
	smaller := old - int64(math.Round(float64(t.BodyBytes)*(1-ratio)))
	rate := fitRate(old, mss, t.RTTClient, float64(t.Ttransfer))
	save := int64(math.Round(slowStart(old, mss, t.RTTClient, rate) - slowStart(smaller, mss, t.RTTClient, rate)))
	return max(0, min(save, t.Ttransfer))
}
