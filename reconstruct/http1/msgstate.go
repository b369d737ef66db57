package http1

import "sync"

// msgState is the parser's own record of the current message: Message
// without its string headers, which would take 192 of a held parser's
// bytes while a body streams. The extracted values stay in the one string
// they share (see values), with each value's end; the method and protocol
// version are kept as their string and digit, and BodyWire, which the
// end gives, is worked out for the event (message). Events get a Message
// built from it; it fits 112 bytes, so a held parser fits 208.
type msgState struct {
	Start, HeaderEnd, End int64
	ContentLength         int64
	BodyLen               int64
	Hole                  int64
	method                string // Message.Method
	vals                  string // the values one after another, in valDst order
	// ends is each value's end in vals but the last's, len(vals): the
	// values are cut to their limits (values), at most 7,232 bytes in all.
	ends   [nVals - 1]uint16
	Status uint16 // three digits
	proto  uint8  // Message.Proto: 1 + its minor version digit, 0 none

	Kind           Kind
	ExpectContinue bool
	Interim        bool
	NoRequest      bool
	KeepAlive      bool
	Chunked        bool
	CloseDelimited bool
	HeaderTooLarge bool
	Truncated      bool
	Incomplete     bool
	WantBody       bool
}

// valDst is where each value of msgState.vals goes in a Message.
func valDst(m *Message) [nVals]*string {
	return [nVals]*string{&m.URL, &m.Host, &m.Referer, &m.UserAgent, &m.Accept, &m.ContentType,
		&m.ContentEncoding, &m.Location, &m.SecFetchDest, &m.SecFetchMode}
}

// msgPool holds the Messages events are given: one is taken for an event
// and handed back after it, so no parser keeps one.
var msgPool = sync.Pool{New: func() any { return new(Message) }}

// message is the current message as a Message, taken from msgPool: the
// caller hands it back with done.
func (p *Parser) message() *Message {
	s := &p.msg
	m := msgPool.Get().(*Message)
	*m = Message{Start: s.Start, HeaderEnd: s.HeaderEnd, End: s.End, Method: s.method, Status: int(s.Status),
		ContentLength: s.ContentLength, BodyLen: s.BodyLen, BodyWire: s.bodyWire(), Hole: s.Hole,
		Kind: s.Kind, ExpectContinue: s.ExpectContinue, Interim: s.Interim, NoRequest: s.NoRequest,
		KeepAlive: s.KeepAlive, Chunked: s.Chunked, CloseDelimited: s.CloseDelimited,
		HeaderTooLarge: s.HeaderTooLarge, Truncated: s.Truncated, Incomplete: s.Incomplete, WantBody: s.WantBody}
	if s.proto > 0 {
		m.Proto = protos[s.proto-1]
	}
	if s.vals != "" {
		pos := 0
		for i, dst := range valDst(m) {
			end := len(s.vals)
			if i < len(s.ends) {
				end = int(s.ends[i])
			}
			*dst = s.vals[pos:end]
			pos = end
		}
	}
	return m
}

// bodyWire is Message.BodyWire: End - HeaderEnd once the message ended
// (End is set then, and past HeaderEnd), 0 before or without a header end.
func (s *msgState) bodyWire() int64 {
	if s.End > 0 && s.HeaderEnd > 0 {
		return s.End - s.HeaderEnd
	}
	return 0
}

// done hands an event's Message back. WantBody is the one field a
// handler sets (in HeadersDone); it is kept, as the Message was before.
func (p *Parser) done(m *Message) {
	p.msg.WantBody = m.WantBody
	*m = Message{} // the pool must not keep the values alive
	msgPool.Put(m)
}

func (p *Parser) messageStart(h Handler) {
	m := p.message()
	h.MessageStart(m)
	p.done(m)
}

func (p *Parser) headersDoneEvent(h Handler) {
	m := p.message()
	h.HeadersDone(m)
	p.done(m)
}

func (p *Parser) messageEnd(h Handler) {
	m := p.message()
	h.MessageEnd(m)
	p.done(m)
}
