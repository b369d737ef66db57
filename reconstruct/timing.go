package reconstruct

import (
	"strconv"
	"time"
)

// emit computes a transaction's client-perceived times and hands it on.
//
// The capture point is at the server side, rtt (the capture point <-> client
// round trip) away from the client, and one-way delay is taken as rtt/2:
//   - the client started a fresh connection at firstSYN - rtt/2 and learnt it
//     was connected at handshakeACK - rtt/2, so Tconn = handshakeACK - firstSYN
//     (SYN and SYN/ACK loss waits included), as curl's time_connect measures;
//   - it sent a request byte at capture time - rtt/2 and received a response
//     byte at capture time + rtt/2, so Tserver = responseFirst - requestLast + rtt
//     and Ttransfer = responseLast - responseFirst, where responseLast is the
//     last transmission of the last byte (the client's ACK confirms arrival);
//   - Trequest runs from the moment the client was connected (fresh
//     connection) or started sending (reused connection) to its last request
//     byte, so the four components always add up to Total = End - Start.
func (c *conn) emit(st *txState) {
	tx := &st.tx
	r := &c.rec
	tx.ConnectionID = c.id()
	tx.ID = tx.ConnectionID + "-" + strconv.Itoa(tx.Index)
	tx.Interface = r.Interface
	tx.Client, tx.ClientPort = r.Client, r.ClientPort
	tx.Server, tx.ServerPort = r.Server, r.ServerPort
	rtt := c.clientRTT()
	half := rtt / 2
	tx.RTTClient = rtt
	if c.handshakeRTT == 0 {
		tx.Flags |= FlagRTTEstimated
	}
	if r.Flags&FlagMidStream != 0 {
		tx.Flags |= FlagMidStream
	}
	if !st.respStarted {
		tx.Flags |= FlagNoResponse
	}
	hasRequest := tx.RequestFirst != 0
	freshConn := hasRequest && tx.Index == 0 && len(r.SYNTimes) > 0
	if freshConn && r.Established > 0 && tx.RequestFirst-r.Established > preconnectIdle {
		// The client opened this connection ahead of need (a browser's
		// preconnect or spare socket) and used it later: the wait for the
		// handshake was not part of this request's time.
		freshConn = false
		tx.Flags |= FlagPreconnected
	}
	switch {
	case freshConn:
		connected := r.Established
		if connected == 0 || connected > tx.RequestFirst {
			// The handshake ACK was lost or not captured: the first request
			// also acknowledges the SYN/ACK.
			connected = tx.RequestFirst
		}
		tx.Start = r.SYNTimes[0] - half
		tx.Tconn = connected - r.SYNTimes[0]
		tx.Trequest = tx.RequestLast - connected
	case hasRequest:
		tx.Start = tx.RequestFirst - half
		tx.Trequest = tx.RequestLast - tx.RequestFirst
	default:
		// A response without its request: only the transfer is known.
		tx.Flags |= FlagNoRequest
		tx.Start = tx.ResponseFirst + half
	}
	if st.respStarted {
		if hasRequest {
			tx.Tserver = tx.ResponseFirst - tx.RequestLast + rtt
			if tx.Tserver < 0 {
				// The server answered before the request was complete (an early
				// error): the overlap is request time, not server time.
				tx.Trequest += tx.Tserver
				tx.Tserver = 0
			}
		}
		tx.Ttransfer = tx.ResponseLast - tx.ResponseFirst
	}
	if tx.ResponseAcked == 0 && st.respDone {
		tx.Flags |= FlagNoAck
	}
	tx.Total = tx.Tconn + tx.Trequest + tx.Tserver + tx.Ttransfer
	tx.End = tx.Start + tx.Total
	c.t.emitTransaction(tx)
}

// preconnectIdle is how long a connection may sit between its handshake and
// its first request before the connect is no longer counted in that
// request's time. The gap is measured at the capture point, where the
// handshake ACK and the request arrive over the same path, so it is the
// client's own delay whatever the RTT: a client that connects in order to
// send does so within a millisecond or two (curl: ~0.1 ms), while a
// browser's spare connection waits for the HTML to need it (tens of ms to
// seconds). 25 ms leaves a loaded client room for its own scheduling.
const preconnectIdle = int64(25 * time.Millisecond)
