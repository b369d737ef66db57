package http1

import "testing"

func TestLooksLikeRequest(t *testing.T) {
	for in, want := range map[string]bool{
		"GET / HTTP/1.1": true, "OPTIONS * HTTP/1.1": true, "DELETE /x": true,
		"HTTP/1.1 200 OK": false, "GETX / HTTP/1.1": false, "": false, " GET": false, "get / HTTP/1.1": false,
	} {
		if got := LooksLikeRequest([]byte(in)); got != want {
			t.Errorf("LooksLikeRequest(%q) = %v", in, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { LooksLikeRequest([]byte("PATCH /a HTTP/1.1")) }); n != 0 {
		t.Errorf("allocates %v", n)
	}
}

// A parser picked up mid-body finds the next response at a segment start even
// though the body bytes before it did not end a line.
func TestResyncAtSegmentStart(t *testing.T) {
	p := NewParser(Response, 0)
	p.Resync()
	r := &recorder{}
	p.SegmentStart()
	p.Feed([]byte("xxxxxxxxxxxxxxxxxxxx body tail without newline"), r)
	p.SegmentStart()
	p.Feed([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), r)
	ends := r.ends()
	if len(ends) != 1 || ends[0].Status != 200 || ends[0].Start != 46 || ends[0].End != 46+40 {
		t.Fatalf("events: %v", r.ev)
	}
	// Without the segment hint the same bytes are not a line start.
	q := NewParser(Response, 0)
	q.Resync()
	r = &recorder{}
	q.Feed([]byte("xxxxxxxxxxxxxxxxxxxx body tail without newline"), r)
	q.Feed([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), r)
	if len(r.ends()) != 0 {
		t.Fatalf("found a message mid-line: %v", r.ev)
	}
}
