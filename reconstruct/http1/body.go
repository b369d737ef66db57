package http1

// BodyReceiver is implemented by a Handler that wants the bodies of some
// messages (a monitor that reads the pages it times, say). It asks for one
// by setting Message.WantBody in HeadersDone; Body then receives the body's
// payload in stream order as it passes (chunk framing removed, content
// coding untouched) and BodyGap the count of payload bytes that were never
// captured, all before that message's MessageEnd. data is only valid during
// the call. The parser itself still keeps nothing of a body.
type BodyReceiver interface {
	Body(m *Message, data []byte)
	BodyGap(m *Message, n int64)
}

// headersDoneWithBody reports the headers of a message that has a body and
// takes the handler as the body's receiver if it asked.
func (p *Parser) headersDoneWithBody(h Handler) {
	p.msg.WantBody = false
	p.headersDoneEvent(h)
	_, ok := h.(BodyReceiver)
	p.wantBody = p.msg.WantBody && ok
}

// receiver is h as the current message's body receiver, nil unless it
// asked for the body. The parser keeps a flag, not the receiver: the
// handler comes with every Feed and Gap (16 bytes less on a held parser).
func (p *Parser) receiver(h Handler) BodyReceiver {
	if !p.wantBody {
		return nil
	}
	r, _ := h.(BodyReceiver)
	return r
}

func (p *Parser) bodyData(data []byte, h Handler) {
	if r := p.receiver(h); r != nil && len(data) > 0 {
		m := p.message()
		r.Body(m, data)
		p.done(m)
	}
}

func (p *Parser) bodyGap(n int64, h Handler) {
	if r := p.receiver(h); r != nil && n > 0 {
		m := p.message()
		r.BodyGap(m, n)
		p.done(m)
	}
}
