package http1

import "math"

// Parked is a parser waiting between segments in 40 bytes instead of a
// Parser's 208: inside a Content-Length or close-delimited body (the
// state a connection waits in while a response streams), or between
// messages with request methods pending (a response parser while its
// request waits for an answer). Its caller keeps it with the message's
// other state, and the offset where it keeps an idle parser's (see
// Acquire); the Parser goes back to the pool. The zero Parked holds
// nothing. The body bytes left are not kept: the offset gives them.
//
// Parking drops the message's header values (method, URL, Content-Type
// and the rest): the Messages of its later events (Body, BodyGap,
// MessageEnd) carry none, so a handler that parks takes what it needs of
// them in HeadersDone. Everything else resumes as it was.
type Parked struct {
	start, contentLength int64
	// headerLen (HeaderEnd less Start) and hole as uint32: a header
	// section is bounded by an int32 limit, and a message missing 4 GiB
	// or more stays unparked.
	headerLen, hole uint32
	status          uint16
	flags           parkFlags
	proto           uint8
	kind, msgKind   Kind
	st, next        state
	// The pending request methods, oldest first, two codes a byte (see
	// PushRequestMethod): a parser with more keeps them in a Parser.
	mN      uint8
	methods [maxParkedMethods / 2]uint8
}

// maxParkedMethods is the most pending request methods a Parked keeps:
// what fills its 40 bytes.
const maxParkedMethods = 10

// parkFlags are msgState's and the Parser's booleans a Parked keeps.
type parkFlags uint16

const (
	pkHeld parkFlags = 1 << iota
	pkExpectContinue
	pkInterim
	pkNoRequest
	pkKeepAlive
	pkChunked
	pkCloseDelimited
	pkHeaderTooLarge
	pkTruncated
	pkIncomplete
	pkMsgWantBody
	pkWantBody
	pkPrefixOK
	pkStarted
)

// Held reports whether k holds a parked parser.
func (k *Parked) Held() bool { return k.flags&pkHeld != 0 }

// Park moves p into *k and hands p back to the pool, if p waits inside a
// Content-Length or close-delimited body or between messages, with nothing
// else held: no header scratch, at most maxParkedMethods request methods
// pending, no chunk or trailer count, not hunting. Otherwise it leaves p
// as it was and returns false. The caller keeps p.Offset() to resume it
// at.
func (p *Parser) Park(k *Parked) bool {
	m := &p.msg
	var body bool
	switch p.st {
	case stBody:
		// Inside a Content-Length body every byte fed or lost advances
		// the offset and takes one from remain, so their sum stays the
		// body's end.
		body = p.remain == m.HeaderEnd+m.ContentLength-p.off
	case stUntilClose:
		body = p.remain == 0
	case stIdle:
	default:
		return false
	}
	if p.st != stIdle && (!body || m.End != 0 || m.BodyLen != 0 || !fitsUint32(m.HeaderEnd-m.Start) || !fitsUint32(m.Hole)) ||
		p.hs != nil || p.mN > maxParkedMethods ||
		p.chunkLine != 0 || p.trLen != 0 || p.trTotal != 0 || p.trCR || p.atLineStart || p.tentative {
		return false
	}
	*k = Parked{kind: p.kind, st: p.st, next: p.next, mN: p.mN, flags: pkHeld}
	for i := range int(p.mN) {
		j := (int(p.mHead) + i) % MaxPendingMethods
		k.methods[i/2] |= (p.methods[j/2] >> (4 * (j % 2)) & 0xf) << (4 * (i % 2))
	}
	if body {
		// Between messages the message's state is set afresh by the next
		// start line before anything reads it.
		k.start, k.headerLen, k.contentLength, k.hole = m.Start, uint32(m.HeaderEnd-m.Start), m.ContentLength, uint32(m.Hole)
		k.status, k.proto, k.msgKind = m.Status, m.proto, m.Kind
		for _, f := range [...]struct {
			on   bool
			flag parkFlags
		}{{m.ExpectContinue, pkExpectContinue}, {m.Interim, pkInterim}, {m.NoRequest, pkNoRequest},
			{m.KeepAlive, pkKeepAlive}, {m.Chunked, pkChunked}, {m.CloseDelimited, pkCloseDelimited},
			{m.HeaderTooLarge, pkHeaderTooLarge}, {m.Truncated, pkTruncated}, {m.Incomplete, pkIncomplete},
			{m.WantBody, pkMsgWantBody}, {p.wantBody, pkWantBody}, {p.prefixOK, pkPrefixOK}, {p.started, pkStarted}} {
			if f.on {
				k.flags |= f.flag
			}
		}
	}
	p.Release()
	return true
}

// Resume returns the parser parked in k, at stream offset off, bounding
// header sections by maxHeaderBytes as Acquire does, and empties k. Its
// header budget is to be set again (SetBudget).
func (k *Parked) Resume(maxHeaderBytes int, off int64) *Parser {
	p := Acquire(k.kind, maxHeaderBytes, off)
	p.st, p.next, p.mN = k.st, k.next, k.mN
	copy(p.methods[:], k.methods[:]) // oldest first, from mHead 0
	if p.st != stIdle {
		headerEnd := k.start + int64(k.headerLen)
		if p.st == stBody {
			p.remain = headerEnd + k.contentLength - off
		}
		f := k.flags
		p.wantBody, p.prefixOK, p.started = f&pkWantBody != 0, f&pkPrefixOK != 0, f&pkStarted != 0
		p.msg = msgState{Start: k.start, HeaderEnd: headerEnd, ContentLength: k.contentLength, Hole: int64(k.hole),
			Status: k.status, proto: k.proto, Kind: k.msgKind,
			ExpectContinue: f&pkExpectContinue != 0, Interim: f&pkInterim != 0, NoRequest: f&pkNoRequest != 0,
			KeepAlive: f&pkKeepAlive != 0, Chunked: f&pkChunked != 0, CloseDelimited: f&pkCloseDelimited != 0,
			HeaderTooLarge: f&pkHeaderTooLarge != 0, Truncated: f&pkTruncated != 0, Incomplete: f&pkIncomplete != 0,
			WantBody: f&pkMsgWantBody != 0}
	}
	*k = Parked{}
	return p
}

func fitsUint32(n int64) bool { return n >= 0 && n <= math.MaxUint32 }
