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
	p.body = nil
	if p.msg.WantBody {
		p.body, _ = h.(BodyReceiver)
	}
}

func (p *Parser) bodyData(data []byte) {
	if p.body != nil && len(data) > 0 {
		m := p.message()
		p.body.Body(m, data)
		p.done(m)
	}
}

func (p *Parser) bodyGap(n int64) {
	if p.body != nil && n > 0 {
		m := p.message()
		p.body.BodyGap(m, n)
		p.done(m)
	}
}
