package http2wire

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// wire builds the bytes of one direction with the http2 Framer and an
// HPACK encoder of its own, as a real peer would.
type wire struct {
	t    testing.TB
	buf  bytes.Buffer
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func newWire(t testing.TB, client bool) *wire {
	t.Helper()
	w := &wire{t: t}
	w.fr = http2.NewFramer(&w.buf, nil)
	w.fr.AllowIllegalWrites = true
	w.enc = hpack.NewEncoder(&w.hbuf)
	if client {
		w.buf.WriteString(ClientPreface)
	}
	w.check(w.fr.WriteSettings())
	return w
}

func (w *wire) check(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// block encodes name, value pairs into a header block.
func (w *wire) block(kv ...string) []byte {
	w.t.Helper()
	w.hbuf.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		w.check(w.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]}))
	}
	return bytes.Clone(w.hbuf.Bytes())
}

func (w *wire) headers(id uint32, end bool, kv ...string) {
	w.t.Helper()
	w.check(w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: w.block(kv...),
		EndStream: end, EndHeaders: true}))
}

func (w *wire) data(id uint32, end bool, n int) {
	w.t.Helper()
	w.check(w.fr.WriteData(id, end, bytes.Repeat([]byte("x"), n)))
}

// take returns the bytes written since the last take.
func (w *wire) take() []byte {
	b := bytes.Clone(w.buf.Bytes())
	w.buf.Reset()
	return b
}

func get(path string) []string {
	return []string{":method", "GET", ":scheme", "https", ":authority", "example.com", ":path", path}
}

func status(code string, kv ...string) []string { return append([]string{":status", code}, kv...) }

// recorder feeds a Conn and keeps what it reports.
type recorder struct {
	t       *testing.T
	c       *Conn
	streams []*Stream
	errs    []Event
	goaways []Event
}

func newRecorder(t *testing.T, cfg Config) *recorder {
	return &recorder{t: t, c: New(cfg)}
}

func (r *recorder) keep(evs []Event) {
	for _, ev := range evs {
		switch ev.Kind {
		case KindStream:
			r.streams = append(r.streams, ev.Stream)
		case KindError:
			r.errs = append(r.errs, ev)
		case KindGoAway:
			r.goaways = append(r.goaways, ev)
		default:
			r.t.Fatalf("unknown event %v", ev.Kind)
		}
	}
}

func (r *recorder) feed(dir Dir, b []byte, at int64) { r.keep(r.c.Feed(dir, b, at)) }
func (r *recorder) close(at int64)                   { r.keep(r.c.Close(at)) }

func (r *recorder) stream(id uint32) *Stream {
	r.t.Helper()
	for _, st := range r.streams {
		if st.ID == id {
			return st
		}
	}
	r.t.Fatalf("stream %d not emitted; got %d streams, errors %v", id, len(r.streams), r.errs)
	return nil
}

func (r *recorder) noErrors() {
	r.t.Helper()
	if len(r.errs) > 0 {
		r.t.Fatalf("unexpected errors: %v", r.errs[0].Err)
	}
}

// checkStats tests the counters against what was emitted.
func checkStats(t *testing.T, c *Conn, emitted int) {
	t.Helper()
	s := c.Stats()
	if s.StreamsCompleted != int64(emitted) {
		t.Errorf("StreamsCompleted %d, emitted %d", s.StreamsCompleted, emitted)
	}
	if s.StreamsOpened != s.StreamsCompleted+int64(c.OpenStreams()) {
		t.Errorf("opened %d != completed %d + open %d", s.StreamsOpened, s.StreamsCompleted, c.OpenStreams())
	}
	if s.StreamsReset+s.StreamsRefused+s.StreamsIncomplete > s.StreamsCompleted {
		t.Errorf("reset %d + refused %d + incomplete %d over completed %d",
			s.StreamsReset, s.StreamsRefused, s.StreamsIncomplete, s.StreamsCompleted)
	}
	if c.OpenStreams() > c.cfg.MaxStreams {
		t.Errorf("%d streams open, bound %d", c.OpenStreams(), c.cfg.MaxStreams)
	}
}

// checkTimes tests the order of a stream's times.
func checkTimes(t *testing.T, st *Stream) {
	t.Helper()
	for _, s := range []*Side{&st.Request.Side, &st.Response.Side} {
		if s.FirstDataAt != 0 && s.FirstDataAt < s.StartAt {
			t.Errorf("stream %d: first data %d before start %d", st.ID, s.FirstDataAt, s.StartAt)
		}
		if s.EndAt != 0 && (s.EndAt < s.StartAt || s.EndAt < s.FirstDataAt) {
			t.Errorf("stream %d: end %d before start %d or first data %d", st.ID, s.EndAt, s.StartAt, s.FirstDataAt)
		}
	}
	if st.Request.StartAt != 0 && st.Response.StartAt != 0 && st.Response.StartAt < st.Request.StartAt {
		t.Errorf("stream %d: response start %d before request start %d", st.ID, st.Response.StartAt, st.Request.StartAt)
	}
	if st.Request.StartAt != 0 && st.Response.EndAt != 0 && st.Response.EndAt < st.Request.StartAt {
		t.Errorf("stream %d: response end %d before request start %d", st.ID, st.Response.EndAt, st.Request.StartAt)
	}
}
