package http1

import (
	"fmt"
	"reflect"
	"testing"
)

type event struct {
	Type   string // "start", "headers", "end", "desync"
	M      Message
	Off    int64
	Reason string
}

func (e event) String() string {
	if e.Type == "desync" {
		return fmt.Sprintf("desync@%d(%s)", e.Off, e.Reason)
	}
	return fmt.Sprintf("%s%+v", e.Type, e.M)
}

// recorder copies every event, as a handler is told to.
type recorder struct{ ev []event }

func (r *recorder) MessageStart(m *Message) { r.ev = append(r.ev, event{Type: "start", M: *m}) }
func (r *recorder) HeadersDone(m *Message)  { r.ev = append(r.ev, event{Type: "headers", M: *m}) }
func (r *recorder) MessageEnd(m *Message)   { r.ev = append(r.ev, event{Type: "end", M: *m}) }
func (r *recorder) Desync(off int64, reason string) {
	r.ev = append(r.ev, event{Type: "desync", Off: off, Reason: reason})
}

func (r *recorder) ends() []Message {
	var out []Message
	for _, e := range r.ev {
		if e.Type == "end" {
			out = append(out, e.M)
		}
	}
	return out
}

func (r *recorder) desyncs() []event {
	var out []event
	for _, e := range r.ev {
		if e.Type == "desync" {
			out = append(out, e)
		}
	}
	return out
}

func newP(kind Kind, max int, methods ...string) *Parser {
	p := NewParser(kind, max)
	for _, m := range methods {
		p.PushRequestMethod(m)
	}
	return p
}

// feedChunks feeds data split at the given cut points, then closes if asked.
func feedChunks(p *Parser, data []byte, cuts []int, close bool) *recorder {
	r := &recorder{}
	prev := 0
	for _, c := range cuts {
		p.Feed(data[prev:c], r)
		prev = c
	}
	p.Feed(data[prev:], r)
	if close {
		p.Close(r)
	}
	return r
}

// checkEvents asserts the structural invariants every event stream obeys.
func checkEvents(t testing.TB, ev []event, total int64) {
	t.Helper()
	inMsg, headers := false, false
	var lastEnd, lastDesync int64
	for i, e := range ev {
		m := e.M
		switch e.Type {
		case "start":
			if inMsg {
				t.Fatalf("event %d: MessageStart inside a message: %v", i, ev)
			}
			if m.Start < lastEnd || m.Start > total {
				t.Fatalf("event %d: Start %d before previous end %d or past %d", i, m.Start, lastEnd, total)
			}
			inMsg, headers = true, false
		case "headers":
			if !inMsg || headers {
				t.Fatalf("event %d: HeadersDone out of order", i)
			}
			if m.HeaderEnd <= m.Start || m.HeaderEnd > total {
				t.Fatalf("event %d: HeaderEnd %d outside (%d,%d]", i, m.HeaderEnd, m.Start, total)
			}
			headers = true
		case "end":
			if !inMsg {
				t.Fatalf("event %d: MessageEnd without start", i)
			}
			if m.End < m.Start || m.End > total || (m.HeaderEnd != 0 && m.End < m.HeaderEnd) {
				t.Fatalf("event %d: bad offsets %+v (total %d)", i, m, total)
			}
			if headers != (m.HeaderEnd != 0) {
				t.Fatalf("event %d: HeaderEnd %d but HeadersDone seen=%v", i, m.HeaderEnd, headers)
			}
			if m.Hole < 0 || m.Hole > m.End-m.Start || m.BodyLen < 0 || m.BodyWire < 0 || m.BodyLen > m.BodyWire {
				t.Fatalf("event %d: bad lengths %+v", i, m)
			}
			lastEnd = m.End
			inMsg = false
		case "desync":
			if e.Off < lastDesync || e.Off < lastEnd || e.Off > total || e.Reason == "" {
				t.Fatalf("event %d: desync at %d (last end %d, total %d)", i, e.Off, lastEnd, total)
			}
			lastDesync = e.Off
		}
	}
}

func sameEvents(t testing.TB, what string, got, want []event) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: events differ\n got: %v\nwant: %v", what, got, want)
	}
}

// heldHdr is the header bytes p buffers now (nil outside a section).
func (p *Parser) heldHdr() []byte {
	if p.hs == nil {
		return nil
	}
	return p.hs.hdr
}
