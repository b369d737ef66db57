package http1

import (
	"fmt"
	"testing"
)

// A response parser parked after every byte it is fed inside a body or
// between messages, and resumed for the next, reports what one that lived
// throughout reports, but the header values parking drops (Body and
// MessageEnd carry none): the pending request methods (a HEAD's response
// has no body) included.
func TestParkResumeKeepsEvents(t *testing.T) {
	responses := []string{"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 10\r\n\r\n0123456789",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close"}
	// The requests come before their responses, as on a connection: the
	// first two together, pipelined.
	pushes := [][]string{{"GET", "GET"}, nil, {"HEAD"}, {"GET"}}
	for _, gapAt := range []int{-1, 70, 190} {
		t.Run(fmt.Sprint("gap at ", gapAt), func(t *testing.T) {
			whole, parked := newP(Response, 0), newP(Response, 0)
			want, got := &parkRecorder{}, &parkRecorder{}
			var k Parked
			off, parks, at := int64(0), 0, 0
			resume := func() {
				if k.Held() {
					parked = k.Resume(0, off)
				}
			}
			for n, r := range responses {
				for _, m := range pushes[n] {
					resume()
					whole.PushRequestMethod(m)
					parked.PushRequestMethod(m)
					if off = parked.Offset(); parked.Park(&k) {
						parks++
						parked = nil
					}
				}
				for i := range len(r) {
					resume()
					if at == gapAt {
						whole.Gap(1, want)
						parked.Gap(1, got)
					} else {
						whole.Feed([]byte{r[i]}, want)
						parked.Feed([]byte{r[i]}, got)
					}
					at++
					if off = parked.Offset(); parked.Park(&k) {
						parks++
						parked = nil
					}
				}
			}
			resume()
			whole.Close(want)
			parked.Close(got)
			if parks < 20 || k.Held() {
				t.Fatalf("parked %d times, still held %v: want a park after each body byte", parks, k.Held())
			}
			if len(got.ev) != len(want.ev) {
				t.Fatalf("events:\n got %v\nwant %v", got.ev, want.ev)
			}
			for i, w := range want.ev {
				if (w.Type == "end" || w.Type == "body") && got.ev[i] != w {
					// Only the values parking drops may differ.
					w.M.Method, w.M.ContentType = "", ""
				}
				if got.ev[i] != w {
					t.Errorf("event %d: got %v, want %v", i, got.ev[i], w)
				}
			}
		})
	}
}

// Parking needs a plain body or the gap between messages with nothing else
// held: a header section or more request methods pending than a Parked
// keeps keep the parser.
func TestParkRefusesHeldState(t *testing.T) {
	var k Parked
	p := newP(Response, 0, "GET")
	p.Feed([]byte("HTTP/1.1 200 OK\r\nContent-Le"), &recorder{})
	if p.Park(&k) || k.Held() {
		t.Error("parked inside a header section")
	}
	p = newP(Response, 0, "GET", "GET", "GET", "GET", "GET", "GET", "GET", "GET", "GET", "GET", "GET", "GET")
	p.Feed([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n12"), &recorder{})
	if p.Park(&k) || k.Held() {
		t.Error("parked with 11 request methods pending")
	}
}

// parkRecorder records events with the body's bytes, comparable.
type parkRecorder struct {
	ev []struct {
		Type string
		M    Message
		Data string
	}
}

func (r *parkRecorder) add(typ string, m *Message, data string) {
	r.ev = append(r.ev, struct {
		Type string
		M    Message
		Data string
	}{typ, *m, data})
}

func (r *parkRecorder) MessageStart(m *Message) { r.add("start", m, "") }
func (r *parkRecorder) HeadersDone(m *Message) {
	m.WantBody = true
	r.add("headers", m, "")
}
func (r *parkRecorder) MessageEnd(m *Message) { r.add("end", m, "") }
func (r *parkRecorder) Desync(off int64, reason string) {
	r.add("desync", &Message{Start: off}, reason)
}
func (r *parkRecorder) Body(m *Message, data []byte) { r.add("body", m, string(data)) }
func (r *parkRecorder) BodyGap(m *Message, n int64)  { r.add("body", m, fmt.Sprint("gap ", n)) }
