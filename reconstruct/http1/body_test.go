package http1

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// bodyRecorder is a recorder that asks for every body and keeps it, with
// gaps as runs of '?'.
type bodyRecorder struct {
	recorder
	bodies [][]byte
	cur    []byte
	gaps   int64
}

func (r *bodyRecorder) HeadersDone(m *Message) {
	m.WantBody = true
	r.cur = []byte{}
	r.recorder.HeadersDone(m)
}

func (r *bodyRecorder) Body(m *Message, data []byte) { r.cur = append(r.cur, data...) }
func (r *bodyRecorder) BodyGap(m *Message, n int64) {
	r.gaps += n
	r.cur = append(r.cur, bytes.Repeat([]byte{'?'}, int(min(n, 1<<16)))...)
}

// MessageEnd keeps one body per message (nil when the headers never
// completed), so bodies line up with the end events.
func (r *bodyRecorder) MessageEnd(m *Message) {
	r.bodies = append(r.bodies, r.cur)
	r.cur = nil
	r.recorder.MessageEnd(m)
}

func feedBodies(p *Parser, data []byte, cuts []int, close bool) *bodyRecorder {
	r := &bodyRecorder{}
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

func TestBodyDelivery(t *testing.T) {
	cases := []struct {
		name, in string
		methods  []string
		want     []string
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 204 No\r\n\r\n", []string{"GET", "GET"}, []string{"hello"}},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nwiki\r\n5;x=y\r\npedia\r\n0\r\nT: v\r\n\r\n", []string{"GET"}, []string{"wikipedia"}},
		{"close-delimited", "HTTP/1.0 200 OK\r\n\r\nuntil the end", []string{"GET"}, []string{"until the end"}},
		{"head has none", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", []string{"HEAD"}, nil},
		{"two bodies", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ncde", []string{"GET", "GET"}, []string{"ab", "cde"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			for split := 0; split <= len(data); split++ {
				var cuts []int
				if split > 0 && split < len(data) {
					cuts = []int{split}
				}
				r := feedBodies(newP(Response, 0, tc.methods...), data, cuts, true)
				var got []string
				for _, b := range r.bodies {
					// One entry per message: those without a body are empty.
					if len(b) > 0 {
						got = append(got, string(b))
					}
				}
				if strings.Join(got, "|") != strings.Join(tc.want, "|") {
					t.Fatalf("split at %d: bodies %q, want %q", split, got, tc.want)
				}
			}
		})
	}
}

func TestBodyGapAndOptIn(t *testing.T) {
	in := []byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")
	p := newP(Response, 0, "GET")
	r := &bodyRecorder{}
	hdr := bytes.Index(in, []byte("\r\n\r\n")) + 4
	p.Feed(in[:hdr+3], r)
	p.Gap(4, r)
	p.Feed(in[hdr+7:], r)
	if len(r.bodies) != 1 || string(r.bodies[0]) != "012????789" || r.gaps != 4 {
		t.Fatalf("bodies %q gaps %d", r.bodies, r.gaps)
	}
	// A plain recorder does not ask: no body calls, and the parser keeps
	// nothing of the body.
	p = newP(Response, 0, "GET")
	rec := &recorder{}
	p.Feed(in, rec)
	if p.wantBody || len(rec.ends()) != 1 {
		t.Fatalf("body wanted %v, ends %d", p.wantBody, len(rec.ends()))
	}
}

func TestNavigationHeaders(t *testing.T) {
	req := "GET /p HTTP/1.1\r\nHost: h\r\nSec-Fetch-Dest: document\r\nsec-fetch-mode: navigate\r\n\r\n"
	r := feedChunks(newP(Request, 0), []byte(req), nil, false)
	m := r.ends()[0]
	if m.SecFetchDest != "document" || m.SecFetchMode != "navigate" {
		t.Fatalf("sec-fetch: %q %q", m.SecFetchDest, m.SecFetchMode)
	}
	resp := "HTTP/1.1 302 Found\r\nLocation: /p3.html\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n"
	r = feedChunks(newP(Response, 0, "GET"), []byte(resp), nil, false)
	m = r.ends()[0]
	if m.Location != "/p3.html" || m.ContentEncoding != "gzip" {
		t.Fatalf("location %q encoding %q", m.Location, m.ContentEncoding)
	}
}

// checkBodySplitInvariant: the bodies delivered do not depend on how the
// stream was split, and a complete body without holes has BodyLen bytes.
func checkBodySplitInvariant(t *testing.T, kind Kind, data []byte, seed uint64, mk func() *Parser, closeIt bool) {
	whole := feedBodies(mk(), data, nil, closeIt)
	rng := rand.New(rand.NewPCG(seed^0x5eed, seed|1))
	var cuts []int
	for i := 0; i < len(data); {
		i += 1 + rng.IntN(8)
		if i < len(data) {
			cuts = append(cuts, i)
		}
	}
	split := feedBodies(mk(), data, cuts, closeIt)
	if len(whole.bodies) != len(split.bodies) {
		t.Fatalf("%v: %d bodies whole, %d split", kind, len(whole.bodies), len(split.bodies))
	}
	for i := range whole.bodies {
		if !bytes.Equal(whole.bodies[i], split.bodies[i]) {
			t.Fatalf("%v: body %d differs when split: %q vs %q", kind, i, whole.bodies[i], split.bodies[i])
		}
	}
	ends := whole.ends()
	for i, m := range ends {
		b := whole.bodies[i]
		if m.HeaderEnd == 0 || m.Incomplete || m.Hole != 0 {
			continue
		}
		if int64(len(b)) != m.BodyLen {
			t.Fatalf("%v: body of %d bytes, BodyLen %d (%+v)", kind, len(b), m.BodyLen, m)
		}
	}
}
