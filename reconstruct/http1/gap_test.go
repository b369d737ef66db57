package http1

import (
	"strings"
	"testing"
)

// segment is a piece of stream: bytes, or a gap of n uncaptured bytes.
type segment struct {
	data string
	gap  int64
}

func feedSegs(p *Parser, segs []segment, close bool) *recorder {
	r := &recorder{}
	for _, s := range segs {
		if s.gap > 0 {
			p.Gap(s.gap, r)
		} else {
			p.Feed([]byte(s.data), r)
		}
	}
	if close {
		p.Close(r)
	}
	return r
}

func TestGapInContentLengthBody(t *testing.T) {
	hdr := "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n" // 39 bytes
	next := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	p := newP(Response, 0, "GET", "GET")
	r := feedSegs(p, []segment{{data: hdr + "ab"}, {gap: 5}, {data: "cde" + next}}, false)
	checkEvents(t, r.ev, p.Offset())
	ends := r.ends()
	if len(ends) != 2 || len(r.desyncs()) != 0 {
		t.Fatalf("events %v", r.ev)
	}
	if m := ends[0]; m.HeaderEnd != 39 || m.End != 49 || m.Hole != 5 || m.BodyLen != 10 || m.Incomplete {
		t.Fatalf("first %+v", m)
	}
	if m := ends[1]; m.Start != 49 || m.End != 49+n(next) || m.Hole != 0 {
		t.Fatalf("second %+v", m)
	}
}

func TestGapEndingExactlyAtBodyEnd(t *testing.T) {
	hdr := "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
	next := "HTTP/1.1 204 No Content\r\n\r\n"
	p := newP(Response, 0, "GET", "GET")
	r := feedSegs(p, []segment{{data: hdr + "abc"}, {gap: 7}, {data: next}}, false)
	ends := r.ends()
	if len(ends) != 2 || len(r.desyncs()) != 0 || ends[0].End != 49 || ends[0].Hole != 7 || ends[1].Status != 204 || ends[1].Start != 49 {
		t.Fatalf("events %v", r.ev)
	}
}

func TestGapPastBodyEndResyncs(t *testing.T) {
	hdr := "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n"
	p := newP(Response, 0, "GET", "GET", "GET")
	// The gap swallows the body's last 5 bytes and the start of the next
	// response; parsing resumes at the third response's status line.
	r := feedSegs(p, []segment{{data: hdr + "abcde"}, {gap: 30}, {data: "ength: 3\r\n\r\n" + "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nq"}}, false)
	checkEvents(t, r.ev, p.Offset())
	ends := r.ends()
	if len(ends) != 2 || ends[0].End != 49 || ends[0].Hole != 5 || ends[0].Incomplete {
		t.Fatalf("first: %v", r.ev)
	}
	d := r.desyncs()
	if len(d) != 1 || d[0].Off != 49 || d[0].Reason != ReasonGap {
		t.Fatalf("desyncs %v", d)
	}
	if m := ends[1]; m.Start != 44+30+12 || m.BodyLen != 1 || m.Incomplete {
		t.Fatalf("resynced %+v", m)
	}
}

func TestGapInHeaders(t *testing.T) {
	p := newP(Request, 0)
	r := feedSegs(p, []segment{{data: "GET /a HTTP/1.1\r\nHo"}, {gap: 10}, {data: "st: x\r\n\r\n" + getB}}, false)
	checkEvents(t, r.ev, p.Offset())
	ends := r.ends()
	if len(ends) != 2 {
		t.Fatalf("events %v", r.ev)
	}
	if m := ends[0]; m.URL != "/a" || m.Method != "GET" || !m.Incomplete || m.End != 19 || m.HeaderEnd != 0 {
		t.Fatalf("cut message %+v", m)
	}
	if d := r.desyncs(); len(d) != 1 || d[0].Off != 19 || d[0].Reason != ReasonGap {
		t.Fatalf("desyncs %v", d)
	}
	if m := ends[1]; m.Start != 19+10+9 || m.URL != "/b.png" || m.Host != "img.test" || m.Incomplete {
		t.Fatalf("next %+v", m)
	}
}

func TestGapBetweenMessagesAndInHunt(t *testing.T) {
	p := newP(Request, 0)
	// A gap at a message boundary still loses sync (a whole message may be
	// in it), but the message right after the gap is found at once.
	r := feedSegs(p, []segment{{data: getB}, {gap: 100}, {data: getB}, {gap: 3}, {data: "junk\r\n"}, {gap: 4}, {data: getB}}, false)
	checkEvents(t, r.ev, p.Offset())
	ends := r.ends()
	if len(ends) != 3 || ends[1].Start != n(getB)+100 || ends[2].Start != 2*n(getB)+100+3+6+4 {
		t.Fatalf("events %v", r.ev)
	}
	if d := r.desyncs(); len(d) != 2 || d[0].Off != n(getB) || d[1].Off != 2*n(getB)+100 {
		t.Fatalf("desyncs %v", d)
	}
}

func TestGapInChunkedBody(t *testing.T) {
	hdr := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" // 47 bytes
	p := newP(Response, 0, "GET")
	// Inside a chunk's payload the gap is absorbed.
	r := feedSegs(p, []segment{{data: hdr + "a\r\n01"}, {gap: 4}, {data: "6789\r\n0\r\n\r\n"}}, false)
	ends := r.ends()
	if len(ends) != 1 || len(r.desyncs()) != 0 || ends[0].Hole != 4 || ends[0].BodyLen != 10 || ends[0].End != 47+3+10+2+5 || ends[0].Incomplete {
		t.Fatalf("events %v", r.ev)
	}
	// Past the payload the chunk framing is lost.
	p = newP(Response, 0, "GET")
	r = feedSegs(p, []segment{{data: hdr + "3\r\nab"}, {gap: 10}, {data: "\r\n0\r\n\r\n"}}, true)
	ends = r.ends()
	if len(ends) != 1 || !ends[0].Incomplete || ends[0].Hole != 1 || ends[0].End != 47+3+3 {
		t.Fatalf("events %v", r.ev)
	}
	if d := r.desyncs(); len(d) != 1 || d[0].Off != 53 {
		t.Fatalf("desyncs %v", d)
	}
}

func TestGapInCloseDelimitedBody(t *testing.T) {
	p := newP(Response, 0, "GET")
	r := feedSegs(p, []segment{{data: "HTTP/1.0 200 OK\r\n\r\nab"}, {gap: 1000}, {data: "cd"}}, true)
	ends := r.ends()
	if len(ends) != 1 || ends[0].End != 19+1004 || ends[0].Hole != 1000 || ends[0].BodyLen != 1004 || ends[0].Incomplete || !ends[0].CloseDelimited {
		t.Fatalf("events %v", r.ev)
	}
}

func TestHeaderTooLarge(t *testing.T) {
	const limit = 1024
	var big strings.Builder
	big.WriteString("GET /big HTTP/1.1\r\nHost: h\r\n")
	for i := 0; i < 200; i++ {
		big.WriteString("X-Filler: 0123456789012345678901234567890123456789\r\n")
	}
	big.WriteString("\r\n")
	in := big.String() + getB
	// One shot, and byte by byte while checking the buffer stays bounded.
	want := feedChunks(newP(Request, limit), []byte(in), nil, false).ev
	p := newP(Request, limit)
	r := &recorder{}
	for i := 0; i < len(in); i++ {
		p.Feed([]byte{in[i]}, r)
		if len(p.heldHdr()) > limit || cap(p.heldHdr()) > 4*limit {
			t.Fatalf("header buffer %d/%d at byte %d", len(p.heldHdr()), cap(p.heldHdr()), i)
		}
	}
	sameEvents(t, "byte by byte", r.ev, want)
	ends := r.ends()
	if len(ends) != 2 {
		t.Fatalf("events %v", r.ev)
	}
	if m := ends[0]; !m.HeaderTooLarge || !m.Incomplete || m.End != limit || m.URL != "/big" || m.Host != "h" || m.HeaderEnd != 0 {
		t.Fatalf("big %+v", m)
	}
	if d := r.desyncs(); len(d) != 1 || d[0].Off != limit || d[0].Reason != ReasonHeaderTooLarge {
		t.Fatalf("desyncs %v", d)
	}
	if m := ends[1]; m.Start != int64(big.Len()) || m.URL != "/b.png" {
		t.Fatalf("next %+v", m)
	}
}

func TestLongURL(t *testing.T) {
	url := "/" + strings.Repeat("u", 5000)
	in := "GET " + url + " HTTP/1.1\r\nUser-Agent: " + strings.Repeat("a", 600) + "\r\n\r\n"
	r := feedChunks(newP(Request, 0), []byte(in), nil, false)
	ends := r.ends()
	if len(ends) != 1 || len(ends[0].URL) != MaxURLLen || ends[0].URL != url[:MaxURLLen] || len(ends[0].UserAgent) != MaxValueLen || !ends[0].Truncated || ends[0].End != n(in) {
		t.Fatalf("events %v", r.ev)
	}
	// A start line longer than the header limit is still reported.
	in = "GET " + url + " HTTP/1.1\r\n\r\n" + getB
	r = feedChunks(newP(Request, 1000), []byte(in), nil, false)
	ends = r.ends()
	if len(ends) != 2 || !ends[0].HeaderTooLarge || ends[0].Method != "GET" || ends[0].URL != url[:996] || ends[0].Proto != "" || ends[1].URL != "/b.png" {
		t.Fatalf("events %v", r.ev)
	}
}

func TestChunkSizeLimits(t *testing.T) {
	hdr := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	// 2^63-1 is representable: the body just never ends.
	r := feedChunks(newP(Response, 0, "GET"), []byte(hdr+"7fffffffffffffff\r\nabc"), nil, true)
	if e := r.ends(); len(e) != 1 || !e[0].Incomplete || e[0].BodyLen != 3 || len(r.desyncs()) != 0 {
		t.Fatalf("events %v", r.ev)
	}
	for _, size := range []string{"80000000000000000", "ffffffffffffffffffff", strings.Repeat("0", 5000) + "1"} {
		r = feedChunks(newP(Response, 0, "GET"), []byte(hdr+size+"\r\nabc"), nil, true)
		d := r.desyncs()
		if e := r.ends(); len(e) != 1 || !e[0].Incomplete || e[0].BodyLen != 0 || len(d) != 1 {
			t.Fatalf("size %.20s: events %v", size, r.ev)
		}
		if d[0].Reason != ReasonChunkOverflow && d[0].Reason != ReasonChunkLine {
			t.Fatalf("reason %q", d[0].Reason)
		}
	}
	// Extensions are bounded too.
	r = feedChunks(newP(Response, 0, "GET"), []byte(hdr+"1;"+strings.Repeat("e", 2*maxChunkLine)), nil, false)
	if d := r.desyncs(); len(d) != 1 || d[0].Reason != ReasonChunkLine {
		t.Fatalf("events %v", r.ev)
	}
}

func TestHuntDoesNotBufferUnbounded(t *testing.T) {
	p := newP(Request, 512)
	r := &recorder{}
	p.Feed([]byte("\x00garbage\n"), r)
	// A candidate that never completes its line is dropped at the limit.
	long := "GET /" + strings.Repeat("x", 100000)
	for i := 0; i < len(long); i += 7 {
		p.Feed([]byte(long[i:min(i+7, len(long))]), r)
		if len(p.heldHdr()) > 512 {
			t.Fatalf("buffered %d", len(p.heldHdr()))
		}
	}
	p.Feed([]byte("\r\n"+getB), r)
	if e := r.ends(); len(e) != 1 || e[0].URL != "/b.png" || e[0].Start != int64(9+len(long)+2) || len(r.desyncs()) != 1 {
		t.Fatalf("events %v", r.ev)
	}
	one := feedChunks(newP(Request, 512), []byte("\x00garbage\n"+long+"\r\n"+getB), nil, false)
	sameEvents(t, "one shot", one.ev, r.ev)
}

func TestTrailerLimit(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + strings.Repeat("X-T: 1\r\n", 100)
	r := feedChunks(newP(Response, 256, "GET"), []byte(in), nil, false)
	d := r.desyncs()
	if e := r.ends(); len(e) != 1 || !e[0].Incomplete || len(d) != 1 || d[0].Reason != ReasonTrailerTooBig {
		t.Fatalf("events %v", r.ev)
	}
}

func TestSwitchToOpaqueDropsUnconfirmedStart(t *testing.T) {
	p := newP(Request, 0)
	r := &recorder{}
	p.Feed([]byte("GET /ws HTTP/1.1\r\n\r\nGE"), r)
	p.SwitchToOpaque()
	p.Feed([]byte("T / HTTP/1.1\r\n\r\n"), r)
	p.Gap(10, r)
	p.Close(r)
	if len(r.ends()) != 1 || len(r.desyncs()) != 0 || p.Offset() != 22+16+10 {
		t.Fatalf("events %v offset %d", r.ev, p.Offset())
	}
}
