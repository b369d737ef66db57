package http2wire

import (
	"reflect"
	"testing"

	"golang.org/x/net/http2"
)

// FuzzConn feeds arbitrary bytes to both directions, split where the
// fuzzer says, and checks that nothing panics, that counters agree with
// what was emitted, that emitted times are in order and that memory stays
// bounded, kept bodies included, and is accounted for.
func FuzzConn(f *testing.F) {
	client, server := script(f)
	f.Add(client, server, uint16(7), uint16(3), false)
	f.Add(client, server, uint16(1), uint16(1), true)
	f.Add([]byte(ClientPreface+"\x00\x00\x00\x04\x00\x00\x00\x00\x00"), []byte{}, uint16(0), uint16(0), false)
	f.Add([]byte(ClientPreface), []byte("\x00\x40\x01\x09\x00\x00\x00\x00\x00"), uint16(2), uint16(5), false)
	client, server = pageScript(f)
	f.Add(client, server, uint16(5), uint16(9), false)
	f.Add(client, server, uint16(64), uint16(2), true)
	f.Fuzz(func(t *testing.T, client, server []byte, clientStep, serverStep uint16, gap bool) {
		const maxBody, maxBuffered = 50, 120
		granted, limited := 0, int64(0)
		c := New(Config{MaxStreams: 8, MaxHeaderListSize: 4096, MaxValueLen: 64, MaxHeaderTableSize: 4096,
			WantBody:   func(status int, _ string) bool { return status > 0 },
			MaxBodyLen: maxBody, MaxBodyBuffered: maxBuffered,
			Reserve: func(n int) int {
				n = min(n, 200-granted) // the caller's budget
				granted += n
				return n
			}})
		emitted := 0
		var at int64
		// Copies of the emitted streams: the Conn must not touch them again.
		var kept []*Stream
		var copies []Stream
		check := func(evs []Event) {
			for _, ev := range evs {
				if ev.At != at {
					t.Fatalf("event at %d, fed at %d", ev.At, at)
				}
				switch ev.Kind {
				case KindStream:
					emitted++
					checkTimes(t, ev.Stream)
					checkBounds(t, ev.Stream, 64)
					checkBody(t, ev.Stream, maxBody)
					if ev.Stream.Response.BodyLimited {
						limited++
					}
					kept, copies = append(kept, ev.Stream), append(copies, *ev.Stream)
				case KindError:
					if ev.Err == nil || c.Err(ev.Dir) == nil {
						t.Fatalf("error event without error: %+v", ev)
					}
				}
			}
			checkStats(t, c, emitted)
			if c.bodyHeld < 0 || c.bodyHeld > maxBuffered || c.bodyHeld > granted {
				t.Fatalf("%d body bytes held, %d granted", c.bodyHeld, granted)
			}
		}
		steps := [2]int{int(clientStep)%64 + 1, int(serverStep)%64 + 1}
		data := [2][]byte{client, server}
		for len(data[0])+len(data[1]) > 0 {
			for dir := range data {
				n := min(steps[dir], len(data[dir]))
				if n == 0 {
					continue
				}
				at++
				check(c.Feed(Dir(dir), data[dir][:n], at))
				data[dir] = data[dir][n:]
				if gap && dir == 1 && len(data[1])%97 == 5 {
					at++
					check(c.Gap(ServerToClient, 3, at))
				}
			}
		}
		at++
		check(c.Close(at))
		if c.OpenStreams() != 0 {
			t.Fatalf("%d streams open after Close", c.OpenStreams())
		}
		for i, st := range kept {
			if !reflect.DeepEqual(*st, copies[i]) {
				t.Fatalf("stream %d changed after it was emitted", st.ID)
			}
		}
		s := c.Stats()
		if s.Bytes[0] != int64(len(client)) || s.Bytes[1] != int64(len(server)) {
			t.Fatalf("bytes %v, fed %d %d", s.Bytes, len(client), len(server))
		}
		// Every byte granted is in some emitted body, and only those.
		bodies := 0
		for _, st := range kept {
			bodies += len(st.Response.Body)
		}
		if bodies != granted || c.bodyHeld != 0 || s.BodiesCut != limited {
			t.Fatalf("bodies hold %d bytes, %d granted, %d held; %d cut, %d limited", bodies, granted, c.bodyHeld,
				s.BodiesCut, limited)
		}
	})
}

// checkBody tests a stream's body against its bounds and its DATA.
func checkBody(t *testing.T, st *Stream, maxBody int) {
	t.Helper()
	r := st.Response
	switch {
	case len(r.Body) > maxBody:
		t.Fatalf("stream %d: body of %d bytes kept", st.ID, len(r.Body))
	case int64(len(r.Body)) > r.BodyBytes:
		t.Fatalf("stream %d: body of %d bytes, %d received", st.ID, len(r.Body), r.BodyBytes)
	case r.BodyLimited && !r.BodyCut:
		t.Fatalf("stream %d: limited, not cut", st.ID)
	case (r.Body != nil || r.BodyCut) && !r.keepBody:
		t.Fatalf("stream %d: body not asked for", st.ID)
	case r.keepBody && !r.Ended && !r.BodyCut:
		t.Fatalf("stream %d: unfinished body not cut", st.ID)
	}
}

// pageScript is a page and its objects, with Referers, padding, a
// redirect and a reset, for the fuzzer to start from.
func pageScript(t testing.TB) (client, server []byte) {
	cl, sv := newWire(t, true), newWire(t, false)
	cl.headers(1, true, append(get("/"), "accept", "text/html", "sec-fetch-dest", "document")...)
	cl.headers(3, true, append(get("/a.css"), "referer", "https://example.com/", "sec-fetch-dest", "style")...)
	cl.headers(5, true, append(get("/old"), "referer", "https://example.com/")...)
	sv.headers(1, false, status("200", "content-type", "text/html", "content-encoding", "identity")...)
	sv.check(sv.fr.WriteDataPadded(1, false, []byte(`<link rel=stylesheet href=/a.css>`), make([]byte, 9)))
	sv.headers(3, false, status("200", "content-type", "text/css")...)
	sv.check(sv.fr.WriteDataPadded(3, true, []byte(`body{background:url(/b.png)}`), make([]byte, 3)))
	sv.headers(5, true, status("302", "location", "/new")...)
	sv.data(1, false, 70)
	sv.check(sv.fr.WriteRSTStream(1, http2.ErrCodeInternal))
	return cl.take(), sv.take()
}

// checkBounds tests that retained header data stays within the Config.
func checkBounds(t *testing.T, st *Stream, maxValue int) {
	t.Helper()
	r := st.Request
	for _, v := range []string{r.Method, r.Scheme, r.Authority, r.Path, r.Protocol, r.UserAgent, r.ContentType,
		r.Referer, r.Accept, r.SecFetchDest, st.Response.ContentType, st.Response.Location, st.Response.ContentEncoding} {
		if len(v) > maxValue {
			t.Fatalf("value of %d bytes retained", len(v))
		}
	}
	if len(r.Trailers) > MaxTrailers || len(st.Response.Trailers) > MaxTrailers ||
		len(st.Response.Informational) > maxInformational {
		t.Fatalf("unbounded lists in %+v", st)
	}
	for _, f := range append(r.Trailers, st.Response.Trailers...) {
		if len(f.Name) > maxValue || len(f.Value) > maxValue {
			t.Fatalf("trailer of %d bytes retained", len(f.Value))
		}
	}
}
