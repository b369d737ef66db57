package http2wire

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2"
)

// TestSimpleExchange: one GET and its response, each frame fed at its
// own time, give the request and response fields and times.
func TestSimpleExchange(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	r.feed(ClientToServer, cl.take(), 10)
	r.feed(ServerToClient, sv.take(), 11)
	cl.headers(1, true, append(get("/a"), "user-agent", "ua/1")...)
	r.feed(ClientToServer, cl.take(), 20)
	sv.headers(1, false, status("200", "content-type", "text/plain", "content-length", "5")...)
	r.feed(ServerToClient, sv.take(), 30)
	sv.data(1, false, 3)
	r.feed(ServerToClient, sv.take(), 40)
	sv.data(1, true, 2)
	r.feed(ServerToClient, sv.take(), 50)
	r.noErrors()
	st := r.stream(1)
	want := Stream{ID: 1,
		Request: Request{Side: Side{StartAt: 20, EndAt: 20, Ended: true, HeaderBytes: st.Request.HeaderBytes},
			Seen: true, Method: "GET", Scheme: "https", Authority: "example.com", Path: "/a",
			UserAgent: "ua/1", ContentLength: -1},
		Response: Response{Side: Side{StartAt: 30, FirstDataAt: 40, EndAt: 50, Ended: true, BodyBytes: 5,
			HeaderBytes: st.Response.HeaderBytes}, Status: 200, FinalHeadersAt: 30,
			ContentType: "text/plain", ContentLength: 5},
	}
	if !reflect.DeepEqual(*st, want) {
		t.Fatalf("got %+v\nwant %+v", *st, want)
	}
	if st.Request.HeaderBytes == 0 || st.Response.HeaderBytes == 0 {
		t.Errorf("header bytes not counted")
	}
	s := r.c.Stats()
	if s.Frames[ClientToServer][FrameHeaders] != 1 || s.Frames[ServerToClient][FrameData] != 2 ||
		s.Frames[ServerToClient][FrameSettings] != 1 {
		t.Errorf("frame counts %v", s.Frames)
	}
	checkStats(t, r.c, 1)
}

// TestContinuationAndPadding: a header block split over HEADERS and two
// CONTINUATIONs, padded HEADERS with priority, and padded DATA decode, and
// padding is not body.
func TestContinuationAndPadding(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	blk := cl.block(append(get("/"+strings.Repeat("p", 100)), "content-type", "application/json")...)
	cl.check(cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:10], PadLength: 7,
		Priority: http2.PriorityParam{StreamDep: 0, Weight: 99, Exclusive: true}}))
	cl.check(cl.fr.WriteContinuation(1, false, blk[10:50]))
	cl.check(cl.fr.WriteContinuation(1, true, blk[50:]))
	cl.check(cl.fr.WriteDataPadded(1, true, make([]byte, 11), make([]byte, 200)))
	r.feed(ClientToServer, cl.take(), 5)
	sv.headers(1, true, status("204")...)
	r.feed(ServerToClient, sv.take(), 6)
	r.noErrors()
	st := r.stream(1)
	if st.Request.Path != "/"+strings.Repeat("p", 100) || st.Request.ContentType != "application/json" {
		t.Errorf("request %+v", st.Request)
	}
	if st.Request.BodyBytes != 11 || !st.Request.Ended || st.Response.Status != 204 {
		t.Errorf("body %d ended %v status %d", st.Request.BodyBytes, st.Request.Ended, st.Response.Status)
	}
	if st.Priority != (Priority{Set: true, Weight: 99, Exclusive: true}) {
		t.Errorf("priority %+v", st.Priority)
	}
	if st.Request.HeaderBytes != int64(len(blk)) {
		t.Errorf("header bytes %d, block %d", st.Request.HeaderBytes, len(blk))
	}
}

// TestPriorityFrame: a PRIORITY frame replaces the priority from HEADERS;
// one for an idle stream opens nothing.
func TestPriorityFrame(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	cl.headers(1, true, get("/")...)
	cl.check(cl.fr.WritePriority(1, http2.PriorityParam{StreamDep: 7, Weight: 15}))
	cl.check(cl.fr.WritePriority(9, http2.PriorityParam{StreamDep: 1, Weight: 1}))
	r.feed(ClientToServer, cl.take(), 1)
	sv.headers(1, true, status("200")...)
	r.feed(ServerToClient, sv.take(), 2)
	r.noErrors()
	if p := r.stream(1).Priority; p != (Priority{Set: true, Dependency: 7, Weight: 15}) {
		t.Errorf("priority %+v", p)
	}
	if r.c.Stats().StreamsOpened != 1 {
		t.Errorf("PRIORITY opened a stream")
	}
}

// TestResets: RST_STREAM from either side ends the stream, recording who
// sent it, and later frames of the stream are ignored.
func TestResets(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	cl.headers(1, false, get("/upload")...)
	cl.headers(3, true, get("/slow")...)
	r.feed(ClientToServer, cl.take(), 1)
	sv.check(sv.fr.WriteRSTStream(1, http2.ErrCodeRefusedStream))
	sv.headers(3, false, status("200")...)
	r.feed(ServerToClient, sv.take(), 2)
	cl.check(cl.fr.WriteRSTStream(3, http2.ErrCodeCancel))
	cl.data(1, true, 10) // after the reset: ignored
	r.feed(ClientToServer, cl.take(), 3)
	sv.data(3, true, 10)
	r.feed(ServerToClient, sv.take(), 4)
	r.noErrors()
	s1, s3 := r.stream(1), r.stream(3)
	if s1.Reset == nil || *s1.Reset != (Reset{By: ServerToClient, Code: uint32(http2.ErrCodeRefusedStream), At: 2}) {
		t.Errorf("stream 1 reset %+v", s1.Reset)
	}
	if s3.Reset == nil || *s3.Reset != (Reset{By: ClientToServer, Code: uint32(http2.ErrCodeCancel), At: 3}) {
		t.Errorf("stream 3 reset %+v", s3.Reset)
	}
	if s1.Request.BodyBytes != 0 || s3.Response.BodyBytes != 0 || s1.Incomplete || s3.Incomplete {
		t.Errorf("frames after reset counted: %+v %+v", s1, s3)
	}
	if s := r.c.Stats(); s.StreamsReset != 2 || s.Ignored < 2 {
		t.Errorf("stats %+v", s)
	}
	checkStats(t, r.c, 2)
}

// TestGoAway: a server GOAWAY refuses the client's streams above its last
// stream id at once, and later ones too; those below complete normally.
func TestGoAway(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	for _, id := range []uint32{1, 3, 5} {
		cl.headers(id, true, get("/")...)
	}
	r.feed(ClientToServer, cl.take(), 1)
	sv.check(sv.fr.WriteGoAway(1, http2.ErrCodeNo, []byte("bye now")))
	r.feed(ServerToClient, sv.take(), 2)
	if len(r.goaways) != 1 || r.goaways[0].GoAway != (GoAway{LastStreamID: 1}) {
		t.Fatalf("goaway events %+v", r.goaways)
	}
	if len(r.streams) != 2 || r.streams[0].ID != 3 || r.streams[1].ID != 5 || !r.streams[0].Refused {
		t.Fatalf("refused streams %+v", r.streams)
	}
	cl.headers(7, true, get("/late")...)
	r.feed(ClientToServer, cl.take(), 3)
	sv.headers(1, true, status("200")...)
	r.feed(ServerToClient, sv.take(), 4)
	r.noErrors()
	if st := r.stream(7); !st.Refused || st.Request.Path != "/late" {
		t.Errorf("stream 7 %+v", st)
	}
	if st := r.stream(1); st.Refused || st.Incomplete || st.Response.Status != 200 {
		t.Errorf("stream 1 %+v", st)
	}
	if s := r.c.Stats(); s.StreamsRefused != 3 {
		t.Errorf("refused %d", s.StreamsRefused)
	}
	checkStats(t, r.c, 4)
}

// TestPushPromise: PUSH_PROMISE opens the promised stream with the
// promised request; the pushed response completes it.
func TestPushPromise(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	cl.headers(1, true, get("/index.html")...)
	r.feed(ClientToServer, cl.take(), 1)
	sv.headers(1, false, status("200")...)
	sv.check(sv.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, PadLength: 3,
		BlockFragment: sv.block(get("/style.css")...), EndHeaders: true}))
	r.feed(ServerToClient, sv.take(), 2)
	sv.data(1, true, 100)
	r.feed(ServerToClient, sv.take(), 3)
	sv.headers(2, false, status("200", "content-type", "text/css")...)
	sv.data(2, true, 50)
	r.feed(ServerToClient, sv.take(), 4)
	r.noErrors()
	st := r.stream(2)
	if !st.Pushed || st.AssociatedID != 1 || st.Request.Path != "/style.css" || !st.Request.Ended ||
		st.Request.StartAt != 2 || st.Response.Status != 200 || st.Response.BodyBytes != 50 ||
		st.Response.ContentType != "text/css" || st.Incomplete {
		t.Errorf("pushed stream %+v", st)
	}
	if s := r.c.Stats(); s.StreamsPushed != 1 || s.Frames[ServerToClient][FramePushPromise] != 1 {
		t.Errorf("stats %+v", s)
	}
	checkStats(t, r.c, 2)
}

// TestHeaderTableSize: a table size the server announced lets the client
// encoder raise its table size; without the SETTINGS the same size update
// is an HPACK error.
func TestHeaderTableSize(t *testing.T) {
	for _, announce := range []bool{true, false} {
		cl, sv := newWire(t, true), newWire(t, false)
		r := newRecorder(t, Config{})
		if announce {
			sv.check(sv.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 8192}))
		}
		r.feed(ServerToClient, sv.take(), 1)
		cl.enc.SetMaxDynamicTableSizeLimit(8192)
		cl.enc.SetMaxDynamicTableSize(8192)
		cl.headers(1, true, append(get("/"), "x-big", strings.Repeat("v", 5000))...)
		cl.headers(3, true, append(get("/"), "x-big", strings.Repeat("v", 5000))...)
		r.feed(ClientToServer, cl.take(), 2)
		if !announce {
			if len(r.errs) != 1 || !errors.Is(r.errs[0].Err, ErrHPACK) {
				t.Fatalf("no HPACK error without SETTINGS: %v", r.errs)
			}
			continue
		}
		sv.headers(1, true, status("200")...)
		sv.headers(3, true, status("200")...)
		r.feed(ServerToClient, sv.take(), 3)
		r.noErrors()
		if r.stream(3).Request.HeaderBytes > 100 {
			t.Errorf("second block not indexed: %d bytes", r.stream(3).Request.HeaderBytes)
		}
	}
}

// TestInformational: 1xx responses are recorded but the final status
// comes from the next headers.
func TestInformational(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	cl.headers(1, false, append(get("/"), "expect", "100-continue")...)
	r.feed(ClientToServer, cl.take(), 1)
	sv.headers(1, false, status("100")...)
	r.feed(ServerToClient, sv.take(), 2)
	cl.data(1, true, 20)
	r.feed(ClientToServer, cl.take(), 3)
	sv.headers(1, false, status("103", "link", "</a.css>")...)
	sv.headers(1, true, status("201")...)
	r.feed(ServerToClient, sv.take(), 4)
	r.noErrors()
	st := r.stream(1)
	want := []Informational{{Status: 100, At: 2}, {Status: 103, At: 4}}
	if !reflect.DeepEqual(st.Response.Informational, want) || st.Response.Status != 201 ||
		st.Response.StartAt != 2 || st.Response.FinalHeadersAt != 4 || st.Request.BodyBytes != 20 {
		t.Errorf("response %+v", st.Response)
	}
}

// script is a conversation used to compare ways of feeding it.
func script(t testing.TB) (client, server []byte) {
	cl, sv := newWire(t, true), newWire(t, false)
	blk := cl.block(get("/split")...)
	cl.check(cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:3], PadLength: 2,
		Priority: http2.PriorityParam{StreamDep: 0, Weight: 3}}))
	cl.check(cl.fr.WriteContinuation(1, true, blk[3:]))
	cl.check(cl.fr.WriteDataPadded(1, true, make([]byte, 30), make([]byte, 5)))
	cl.check(cl.fr.WritePing(false, [8]byte{1}))
	cl.check(cl.fr.WriteRawFrame(0x42, 0, 0, []byte("unknown frame")))
	cl.headers(3, true, get("/two")...)
	sv.headers(1, false, status("200", "content-length", "40")...)
	sv.data(1, true, 40)
	sv.check(sv.fr.WriteWindowUpdate(0, 1000))
	sv.headers(3, false, status("404")...)
	sv.headers(3, true, "grpc-status", "0")
	return cl.take(), sv.take()
}

// TestSplitAnywhere: the same bytes fed one at a time give the same
// streams and counters as fed whole.
func TestSplitAnywhere(t *testing.T) {
	client, server := script(t)
	whole := newRecorder(t, Config{})
	whole.feed(ClientToServer, client, 1)
	whole.feed(ServerToClient, server, 1)
	whole.close(1)
	whole.noErrors()
	bytewise := newRecorder(t, Config{})
	for i := range client {
		bytewise.feed(ClientToServer, client[i:i+1], 1)
	}
	for i := range server {
		bytewise.feed(ServerToClient, server[i:i+1], 1)
	}
	bytewise.close(1)
	if !reflect.DeepEqual(whole.streams, bytewise.streams) || whole.c.Stats() != bytewise.c.Stats() {
		t.Fatalf("whole %+v %+v\nbytewise %+v %+v", whole.streams, whole.c.Stats(), bytewise.streams, bytewise.c.Stats())
	}
	if len(whole.streams) != 2 || whole.streams[0].Request.BodyBytes != 30 || whole.streams[1].Response.Status != 404 ||
		!reflect.DeepEqual(whole.streams[1].Response.Trailers, []Field{{"grpc-status", "0"}}) {
		t.Fatalf("streams %+v", whole.streams)
	}
	if s := whole.c.Stats(); s.UnknownFrames[ClientToServer] != 1 || s.Frames[ClientToServer][FramePing] != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestGap: a gap in the server's bytes stops that direction; the stream
// waiting on it is emitted incomplete and the client's direction goes on.
func TestGap(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	cl.headers(1, true, get("/a")...)
	r.feed(ClientToServer, cl.take(), 1)
	sv.headers(1, false, status("200")...)
	sv.data(1, false, 100)
	b := sv.take()
	r.feed(ServerToClient, b[:len(b)-50], 2)
	r.keep(r.c.Gap(ServerToClient, 50, 3))
	r.feed(ServerToClient, []byte("more bytes"), 4)
	if len(r.errs) != 1 || !errors.Is(r.errs[0].Err, ErrGap) || r.errs[0].Dir != ServerToClient {
		t.Fatalf("errors %v", r.errs)
	}
	st := r.stream(1)
	if !st.Incomplete || st.Response.Status != 200 || st.Response.Ended {
		t.Errorf("stream %+v", st)
	}
	cl.headers(3, false, get("/b")...)
	r.feed(ClientToServer, cl.take(), 5)
	cl.data(3, true, 7)
	r.feed(ClientToServer, cl.take(), 6)
	if st := r.stream(3); st.Request.Path != "/b" || st.Request.BodyBytes != 7 || !st.Incomplete {
		t.Errorf("stream 3 %+v", st)
	}
	if s := r.c.Stats(); s.Gaps != 1 || s.Skipped[ServerToClient] != 60 || s.ProtocolErrors != 0 {
		t.Errorf("stats %+v", s)
	}
	checkStats(t, r.c, 2)
}

// TestFrameSize: a frame over the default maximum is an error unless the
// receiver announced a larger SETTINGS_MAX_FRAME_SIZE.
func TestFrameSize(t *testing.T) {
	for _, announce := range []bool{true, false} {
		cl, sv := newWire(t, true), newWire(t, false)
		r := newRecorder(t, Config{})
		if announce {
			sv.check(sv.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 15}))
		}
		r.feed(ServerToClient, sv.take(), 1)
		cl.headers(1, false, get("/")...)
		cl.data(1, true, 20000)
		r.feed(ClientToServer, cl.take(), 2)
		if announce {
			r.noErrors()
			if r.c.OpenStreams() != 1 {
				t.Errorf("stream not open")
			}
			continue
		}
		if len(r.errs) != 1 || !errors.Is(r.errs[0].Err, ErrFrameSize) || r.c.Stats().ProtocolErrors != 1 {
			t.Fatalf("errors %v", r.errs)
		}
		if r.c.Err(ClientToServer) == nil || r.c.Stats().Skipped[ClientToServer] == 0 {
			t.Errorf("direction not stopped")
		}
	}
}

// TestBadPreface: client bytes that are not the preface stop the client
// direction at once, even split.
func TestBadPreface(t *testing.T) {
	r := newRecorder(t, Config{})
	r.feed(ClientToServer, []byte("PRI * HTTP/2"), 1)
	r.noErrors()
	r.feed(ClientToServer, []byte(".1\r\n\r\nGET / HTTP/1.1\r\n"), 2)
	if len(r.errs) != 1 || !errors.Is(r.errs[0].Err, ErrPreface) {
		t.Fatalf("errors %v", r.errs)
	}
	r.feed(ClientToServer, []byte(ClientPreface), 3)
	if len(r.errs) != 1 {
		t.Errorf("more errors after stopping")
	}
}

// TestStreamBound: new streams beyond MaxStreams are counted dropped and
// their frames ignored, and memory does not grow.
func TestStreamBound(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{MaxStreams: 4})
	for id := uint32(1); id <= 11; id += 2 {
		cl.headers(id, false, get("/")...)
	}
	r.feed(ClientToServer, cl.take(), 1)
	if r.c.OpenStreams() != 4 || r.c.Stats().StreamsDropped != 2 {
		t.Fatalf("open %d dropped %d", r.c.OpenStreams(), r.c.Stats().StreamsDropped)
	}
	cl.data(11, true, 5)
	cl.data(1, true, 5)
	r.feed(ClientToServer, cl.take(), 2)
	sv.headers(11, true, status("200")...)
	sv.headers(1, true, status("200")...)
	r.feed(ServerToClient, sv.take(), 3)
	r.noErrors()
	if len(r.streams) != 1 || r.streams[0].ID != 1 || r.c.OpenStreams() != 3 {
		t.Fatalf("streams %+v open %d", r.streams, r.c.OpenStreams())
	}
	r.close(4)
	if len(r.streams) != 4 || !r.streams[3].Incomplete {
		t.Errorf("close emitted %d", len(r.streams))
	}
	checkStats(t, r.c, 4)
}

// TestHPACKError: a header block that does not decode stops the direction.
func TestHPACKError(t *testing.T) {
	cl := newWire(t, true)
	r := newRecorder(t, Config{})
	cl.check(cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff, 0x7f},
		EndHeaders: true}))
	r.feed(ClientToServer, cl.take(), 1)
	if len(r.errs) != 1 || !errors.Is(r.errs[0].Err, ErrHPACK) {
		t.Fatalf("errors %v", r.errs)
	}
}

// TestContinuationRules: a frame other than CONTINUATION inside a header
// block is a protocol error.
func TestContinuationRules(t *testing.T) {
	cl := newWire(t, true)
	r := newRecorder(t, Config{})
	blk := cl.block(get("/")...)
	cl.check(cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:2]}))
	cl.check(cl.fr.WritePing(false, [8]byte{}))
	r.feed(ClientToServer, cl.take(), 1)
	if len(r.errs) != 1 || !errors.Is(r.errs[0].Err, ErrProtocol) {
		t.Fatalf("errors %v", r.errs)
	}
}

// TestValueBounds: a long path is cut to MaxValueLen and flagged.
func TestValueBounds(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{MaxValueLen: 100, MaxHeaders: 6})
	kv := append(get("/"+strings.Repeat("a", 500)), "user-agent", "u", "content-type", "c", "content-length", "12")
	cl.headers(1, true, kv...)
	r.feed(ClientToServer, cl.take(), 1)
	sv.headers(1, true, status("200")...)
	r.feed(ServerToClient, sv.take(), 2)
	st := r.stream(1)
	if len(st.Request.Path) != 100 || !st.Truncated || st.Request.UserAgent != "u" || st.Request.ContentLength != -1 {
		t.Errorf("request %+v truncated %v", st.Request, st.Truncated)
	}
	if !bytes.Equal([]byte(st.Request.Path), append([]byte("/"), bytes.Repeat([]byte("a"), 99)...)) {
		t.Errorf("path %q", st.Request.Path)
	}
}
