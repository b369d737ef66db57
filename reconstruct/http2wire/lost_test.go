package http2wire

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"golang.org/x/net/http2"
)

// TestClientLost: after the client's direction is lost, responses still
// open and time streams, with the request unseen, and complete when the
// response ends.
func TestClientLost(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	cl.headers(1, true, get("/seen")...)
	r.feed(ClientToServer, cl.take(), 1)
	r.keep(r.c.Gap(ClientToServer, 100, 2))
	sv.headers(1, true, status("200")...)
	sv.headers(3, false, status("302")...)
	r.feed(ServerToClient, sv.take(), 3)
	sv.data(3, true, 9)
	r.feed(ServerToClient, sv.take(), 4)
	if len(r.errs) != 1 || !errors.Is(r.errs[0].Err, ErrGap) {
		t.Fatalf("errors %v", r.errs)
	}
	if st := r.stream(1); st.Incomplete || st.Request.Path != "/seen" || st.Response.Status != 200 {
		t.Errorf("stream 1 %+v", st)
	}
	st := r.stream(3)
	if st.Request.Seen || st.Incomplete || st.Response.Status != 302 || st.Response.BodyBytes != 9 ||
		st.Response.StartAt != 3 || st.Response.EndAt != 4 {
		t.Errorf("stream 3 %+v", st)
	}
	checkStats(t, r.c, 2)
}

// TestEndStreamAcrossContinuation: END_STREAM on HEADERS takes effect
// when the block ends, at the time of its last CONTINUATION.
func TestEndStreamAcrossContinuation(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	blk := cl.block(get("/c")...)
	cl.check(cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:4], EndStream: true}))
	r.feed(ClientToServer, cl.take(), 1)
	if r.c.OpenStreams() != 1 {
		t.Fatalf("stream not opened by HEADERS")
	}
	cl.check(cl.fr.WriteContinuation(1, true, blk[4:]))
	r.feed(ClientToServer, cl.take(), 2)
	sv.headers(1, true, status("200")...)
	r.feed(ServerToClient, sv.take(), 3)
	r.noErrors()
	st := r.stream(1)
	if st.Request.StartAt != 1 || st.Request.EndAt != 2 || st.Request.Path != "/c" {
		t.Errorf("request %+v", st.Request)
	}
}

// TestClientGoAwayRefusesPush: a client GOAWAY refuses the pushed streams
// above its last stream id.
func TestClientGoAwayRefusesPush(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	cl.headers(1, true, get("/")...)
	r.feed(ClientToServer, cl.take(), 1)
	for _, id := range []uint32{2, 4} {
		sv.check(sv.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: id,
			BlockFragment: sv.block(get(fmt.Sprintf("/p%d", id))...), EndHeaders: true}))
	}
	r.feed(ServerToClient, sv.take(), 2)
	cl.check(cl.fr.WriteGoAway(2, http2.ErrCodeProtocol, nil))
	r.feed(ClientToServer, cl.take(), 3)
	r.noErrors()
	if st := r.stream(4); !st.Refused || !st.Pushed || st.Request.Path != "/p4" {
		t.Errorf("stream 4 %+v", st)
	}
	if len(r.goaways) != 1 || r.goaways[0].Dir != ClientToServer || r.goaways[0].GoAway.Code != uint32(http2.ErrCodeProtocol) {
		t.Errorf("goaway %+v", r.goaways)
	}
	if r.c.OpenStreams() != 2 {
		t.Errorf("open %d, want streams 1 and 2", r.c.OpenStreams())
	}
}

// TestResetMidBlock: a stream the server resets while the client's header
// block for it is still open is emitted once and not changed afterwards,
// and the client's HPACK state stays in step.
func TestResetMidBlock(t *testing.T) {
	cl, sv := newWire(t, true), newWire(t, false)
	r := newRecorder(t, Config{})
	blk := cl.block(append(get("/r"), "user-agent", "agent")...)
	cl.check(cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:5]}))
	r.feed(ClientToServer, cl.take(), 1)
	sv.check(sv.fr.WriteRSTStream(1, http2.ErrCodeCancel))
	r.feed(ServerToClient, sv.take(), 2)
	st := r.stream(1)
	snapshot := *st
	cl.check(cl.fr.WriteContinuation(1, true, blk[5:]))
	cl.headers(3, true, append(get("/after"), "user-agent", "agent")...)
	r.feed(ClientToServer, cl.take(), 3)
	sv.headers(3, true, status("200")...)
	r.feed(ServerToClient, sv.take(), 4)
	r.noErrors()
	if !reflect.DeepEqual(*st, snapshot) {
		t.Errorf("emitted stream changed: %+v -> %+v", snapshot, *st)
	}
	if st3 := r.stream(3); st3.Request.Path != "/after" || st3.Request.UserAgent != "agent" {
		t.Errorf("stream 3 %+v", st3)
	}
}
