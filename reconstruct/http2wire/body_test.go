package http2wire

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// wantHTML asks for the bodies of 2xx HTML responses, as the tracker does.
func wantHTML(status int, ct string) bool {
	return status/100 == 2 && strings.HasPrefix(ct, "text/html")
}

// TestPageFields: Referer, Accept and Sec-Fetch-Dest on the request,
// Location and Content-Encoding on the response are kept, and cut to
// MaxValueLen like the others.
func TestPageFields(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{MaxValueLen: 40})
	long := "https://example.com/" + strings.Repeat("r", 100)
	cl.headers(1, true, append(get("/img.png"), "accept", "image/avif,image/webp", "referer", "https://example.com/page",
		"sec-fetch-dest", "image", "x-other", "dropped")...)
	cl.headers(3, true, append(get("/old"), "referer", long)...)
	r.feed(ClientToServer, cl.take(), 1)
	sv.headers(1, false, status("200", "content-type", "image/png", "content-encoding", "br")...)
	sv.data(1, true, 4)
	sv.headers(3, true, status("301", "location", "/new")...)
	r.feed(ServerToClient, sv.take(), 2)
	r.noErrors()
	a := r.stream(1)
	if a.Request.Referer != "https://example.com/page" || a.Request.Accept != "image/avif,image/webp" ||
		a.Request.SecFetchDest != "image" || a.Response.ContentEncoding != "br" || a.Response.Location != "" || a.Truncated {
		t.Errorf("stream 1: request %+v response %+v", a.Request, a.Response)
	}
	b := r.stream(3)
	if b.Response.Location != "/new" || b.Request.Referer != long[:40] || !b.Truncated || b.Request.Accept != "" {
		t.Errorf("stream 3: referer %q location %q truncated %v", b.Request.Referer, b.Response.Location, b.Truncated)
	}
	if a.Response.Body != nil || b.Response.Body != nil {
		t.Errorf("bodies kept without WantBody")
	}
}

// TestBodyKept: a wanted body is the DATA payload without its padding,
// whether fed whole or a byte at a time; an unwanted one is not kept;
// WantBody sees the final status and content type, not a 1xx.
func TestBodyKept(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	cl.headers(1, true, get("/page")...)
	cl.headers(3, true, get("/img")...)
	page := []byte(`<html><img src="/img"></html>`)
	sv.headers(1, false, status("103", "link", "</img>; rel=preload")...)
	sv.headers(1, false, status("200", "content-type", "text/html; charset=utf-8")...)
	sv.headers(3, false, status("200", "content-type", "image/png")...)
	sv.check(sv.fr.WriteDataPadded(1, false, page[:10], bytes.Repeat([]byte("Z"), 20)))
	sv.check(sv.fr.WriteDataPadded(3, true, []byte("PNGDATA"), []byte("ZZ")))
	sv.check(sv.fr.WriteDataPadded(1, false, page[10:], []byte{'Z'}))
	sv.check(sv.fr.WriteDataPadded(1, true, nil, []byte("ZZZZ")))
	client, server := cl.take(), sv.take()
	for _, step := range []int{len(server), 1} {
		var asked []string
		cfg := Config{WantBody: func(st int, ct string) bool {
			asked = append(asked, ct)
			if st != 200 {
				t.Errorf("WantBody asked about status %d", st)
			}
			return wantHTML(st, ct)
		}}
		r := newRecorder(t, cfg)
		r.feed(ClientToServer, client, 1)
		for i := 0; i < len(server); i += step {
			r.feed(ServerToClient, server[i:min(i+step, len(server))], 2)
		}
		r.noErrors()
		p, img := r.stream(1), r.stream(3)
		if !bytes.Equal(p.Response.Body, page) || p.Response.BodyCut || p.Response.BodyBytes != int64(len(page)) {
			t.Errorf("step %d: body %q cut %v bytes %d", step, p.Response.Body, p.Response.BodyCut, p.Response.BodyBytes)
		}
		if img.Response.Body != nil || img.Response.BodyCut {
			t.Errorf("step %d: unwanted body %q kept", step, img.Response.Body)
		}
		if len(asked) != 2 || r.c.bodyHeld != 0 {
			t.Errorf("step %d: WantBody asked about %q; %d bytes still held", step, asked, r.c.bodyHeld)
		}
	}
}

// TestBodyBounds: MaxBodyLen cuts one body, MaxBodyBuffered the bodies
// of streams open together (freed as streams end), Reserve what the
// caller will not grant; each cut is counted once and flagged BodyLimited.
func TestBodyBounds(t *testing.T) {
	html := status("200", "content-type", "text/html")
	t.Run("per body", func(t *testing.T) {
		cl, sv := newWire(t, true), newWire(t, false)
		r := newRecorder(t, Config{WantBody: wantHTML, MaxBodyLen: 10})
		cl.headers(1, true, get("/")...)
		sv.headers(1, false, html...)
		sv.data(1, false, 6)
		sv.data(1, false, 6)
		sv.data(1, true, 6)
		r.feed(ClientToServer, cl.take(), 1)
		r.feed(ServerToClient, sv.take(), 2)
		rs := r.stream(1).Response
		if len(rs.Body) != 10 || !rs.BodyCut || !rs.BodyLimited || rs.BodyBytes != 18 || r.c.Stats().BodiesCut != 1 {
			t.Errorf("body %d cut %v limited %v bytes %d, %d cut", len(rs.Body), rs.BodyCut, rs.BodyLimited, rs.BodyBytes,
				r.c.Stats().BodiesCut)
		}
	})
	t.Run("per connection", func(t *testing.T) {
		cl, sv := newWire(t, true), newWire(t, false)
		r := newRecorder(t, Config{WantBody: wantHTML, MaxBodyBuffered: 12})
		cl.headers(1, true, get("/a")...)
		cl.headers(3, true, get("/b")...)
		cl.headers(5, true, get("/c")...)
		r.feed(ClientToServer, cl.take(), 1)
		sv.headers(1, false, html...)
		sv.headers(3, false, html...)
		sv.data(1, false, 8)
		sv.data(3, false, 8) // 4 fit beside stream 1's 8
		sv.data(1, true, 0)
		sv.data(3, true, 0)
		sv.headers(5, false, html...)
		sv.data(5, true, 12) // both others ended: the room is back
		r.feed(ServerToClient, sv.take(), 2)
		a, b, c := r.stream(1).Response, r.stream(3).Response, r.stream(5).Response
		if len(a.Body) != 8 || a.BodyCut || len(b.Body) != 4 || !b.BodyLimited || len(c.Body) != 12 || c.BodyCut ||
			r.c.Stats().BodiesCut != 1 || r.c.bodyHeld != 0 {
			t.Errorf("bodies %d %v, %d %v, %d %v; %d cut, %d held", len(a.Body), a.BodyCut, len(b.Body), b.BodyCut,
				len(c.Body), c.BodyCut, r.c.Stats().BodiesCut, r.c.bodyHeld)
		}
	})
	t.Run("reserve", func(t *testing.T) {
		cl, sv := newWire(t, true), newWire(t, false)
		budget, asked := 5, 0
		r := newRecorder(t, Config{WantBody: wantHTML, Reserve: func(n int) int {
			asked += n
			n = min(n, budget)
			budget -= n
			return n
		}})
		cl.headers(1, true, get("/")...)
		sv.headers(1, false, html...)
		sv.data(1, false, 3)
		sv.data(1, false, 3)
		sv.data(1, true, 3) // cut: not asked for
		r.feed(ClientToServer, cl.take(), 1)
		r.feed(ServerToClient, sv.take(), 2)
		rs := r.stream(1).Response
		if len(rs.Body) != 5 || !rs.BodyLimited || budget != 0 || asked != 6 {
			t.Errorf("body %d limited %v, budget left %d, asked %d", len(rs.Body), rs.BodyLimited, budget, asked)
		}
	})
}

// TestBodyCutByLoss: a body whose stream was reset, whose DATA was lost
// or that the connection's end left unfinished is cut, not limited; a
// reset after the response ended leaves it whole.
func TestBodyCutByLoss(t *testing.T) {
	html := status("200", "content-type", "text/html")
	setup := func() (*wire, *wire, *recorder) {
		cl, sv := newWire(t, true), newWire(t, false)
		r := newRecorder(t, Config{WantBody: wantHTML})
		cl.headers(1, true, get("/")...)
		cl.headers(3, false, append(get("/upload"), ":method", "POST")...)
		r.feed(ClientToServer, cl.take(), 1)
		sv.headers(1, false, html...)
		sv.data(1, false, 7)
		sv.headers(3, false, html...)
		sv.data(3, true, 5) // whole, though the client's upload goes on
		r.feed(ServerToClient, sv.take(), 2)
		return cl, sv, r
	}
	check := func(name string, r *recorder) {
		t.Helper()
		a, b := r.stream(1).Response, r.stream(3).Response
		if len(a.Body) != 7 || !a.BodyCut || a.BodyLimited || len(b.Body) != 5 || b.BodyCut || r.c.Stats().BodiesCut != 0 {
			t.Errorf("%s: body %d cut %v limited %v; whole one %d cut %v", name, len(a.Body), a.BodyCut, a.BodyLimited,
				len(b.Body), b.BodyCut)
		}
	}
	cl, _, r := setup()
	cl.check(cl.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	cl.check(cl.fr.WriteRSTStream(3, http2.ErrCodeNo))
	r.feed(ClientToServer, cl.take(), 3)
	check("reset", r)

	cl, sv, r := setup()
	r.keep(r.c.Gap(ServerToClient, 100, 3))
	sv.data(1, true, 1)
	r.feed(ServerToClient, sv.take(), 4) // after the gap: not read
	cl.check(cl.fr.WriteRSTStream(3, http2.ErrCodeNo))
	r.feed(ClientToServer, cl.take(), 4)
	check("gap", r)

	_, _, r = setup()
	r.close(3)
	check("close", r)
}
