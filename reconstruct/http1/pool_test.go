package http1

import "testing"

// A parser released while idle and re-acquired at its offset parses the rest
// of the stream exactly as one that lived throughout.
func TestReleaseAcquireKeepsOffsets(t *testing.T) {
	first := []byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
	second := []byte("GET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	p := Acquire(Request, 0, 0)
	r := &recorder{}
	p.Feed(first, r)
	if !p.Idle() {
		t.Fatal("parser between messages is not idle")
	}
	off := p.Offset()
	p.Release()
	q := Acquire(Request, 0, off)
	q.Feed(second, r)
	ends := r.ends()
	if len(ends) != 2 || ends[1].URL != "/b" || ends[1].Start != int64(len(first)) || ends[1].End != int64(len(first)+len(second)) {
		t.Fatalf("events: %v", r.ev)
	}
	// Pending methods or a partial message make a parser busy.
	resp := Acquire(Response, 0, 0)
	resp.PushRequestMethod("HEAD")
	if resp.Idle() {
		t.Error("a response parser with a pending HEAD is idle")
	}
	q.Feed([]byte("GET /c HT"), r)
	if q.Idle() {
		t.Error("a parser inside a start line is idle")
	}
}
