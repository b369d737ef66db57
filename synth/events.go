package synth

import (
	"cmp"
	"slices"

	"github.com/rtmon/rtmon/capture"
)

// Planned packets: the events a pageview is planned as, sorted and written
// in capture-time order.

type evKind uint8

// timeOnly writes the events that carry nothing but their time.
var timeOnly = [evDupRetrans + 1]func(*Conn, int64){
	evSYN: (*Conn).SYN, evSYNACK: (*Conn).SYNACK, evACK: (*Conn).ACK,
	evSAck: (*Conn).ServerAck, evSFIN: (*Conn).ServerFIN, evCFIN: (*Conn).ClientFIN,
}

const (
	evSYN evKind = iota
	evSYNACK
	evACK
	evReq
	evData    // first transmission of a response segment (advances)
	evRetrans // retransmission at rel
	evCAckTo
	evSAck
	evSFIN
	evCFIN
	// Extended model.
	evCLost      // a client packet lost before the capture point
	evReqAt      // client data at rel (any order)
	evSAckTo     // server ACK to rel, SACK blocks in payload
	evCAckSACK   // client ACK to rel, SACK blocks in payload
	evDupRetrans // server retransmission of bytes the client acknowledged
)

type event struct {
	t    int64
	c    *Conn
	kind evKind
	// idOff shifts a client packet's IP ID from the connection's counter:
	// a packet captured out of the order it was sent in keeps the ID it
	// was sent with.
	idOff int8
	// lag (µs) is how long a reordered client packet was held up on its
	// way to the capture point: its timestamps are of its send time.
	lag uint16
	rel uint32
	// payload is the data; for ACKs with SACK blocks the blocks, 8 bytes
	// each (relative left, right), which keeps events small.
	payload []byte
}

func (g *gen) apply(e *event) {
	c := e.c
	off := uint16(int16(e.idOff))
	c.ClientIPID += off
	c.lag = int64(e.lag) * 1000
	if f := timeOnly[e.kind]; f != nil {
		f(c, e.t)
	} else {
		applyWithData(c, e)
	}
	c.ClientIPID -= off
	c.lag = 0
}

// applyWithData writes the events that carry a sequence number or bytes.
func applyWithData(c *Conn, e *event) {
	switch e.kind {
	case evReq:
		c.Client(e.t, e.payload)
	case evData:
		c.Server(e.t, e.payload)
	case evRetrans:
		c.ServerAt(e.t, e.rel, e.payload)
	case evCAckTo:
		c.ClientAckTo(e.t, e.rel)
	case evCLost:
		c.ClientLost()
	case evReqAt:
		c.ClientAt(e.t, e.rel, e.payload)
		if end := e.rel + uint32(len(e.payload)); int32(end-c.cNext) > 0 {
			c.cNext = end // the client's snd_nxt, whatever the capture missed
		}
	case evSAckTo:
		var b [capture.MaxSACKBlocks]capture.SACKBlock
		c.ServerAckToSACK(e.t, e.rel, decodeSACK(e.payload, &b)...)
	case evCAckSACK:
		var b [capture.MaxSACKBlocks]capture.SACKBlock
		c.ClientAckToSACK(e.t, e.rel, decodeSACK(e.payload, &b)...)
	case evDupRetrans:
		c.ServerDupAt(e.t, e.rel, e.payload)
	}
}

func (g *gen) add(t int64, c *Conn, k evKind, rel uint32, p []byte) {
	g.ev = append(g.ev, event{t: t, c: c, kind: k, rel: rel, payload: p})
}

// takeEv starts planning a new stream in a recycled event slice.
func (g *gen) takeEv() {
	if n := len(g.free); n > 0 {
		g.ev, g.free = g.free[n-1], g.free[:n-1]
	} else {
		g.ev = nil
	}
}

// seal orders the planned events into a stream and counts their bytes.
func (g *gen) seal() *stream {
	slices.SortStableFunc(g.ev, func(a, b event) int { return cmp.Compare(a.t, b.t) })
	// Per-packet overhead: record header, link, IP and TCP headers with
	// timestamps; close enough for TargetBytes.
	per := int64(16 + 14 + 20 + 32)
	if g.wl.IPv6 {
		per += 20
	}
	for i := range g.ev {
		if g.ev[i].kind != evCLost {
			g.planned += per + int64(len(g.ev[i].payload))
		}
	}
	return &stream{ev: g.ev}
}
