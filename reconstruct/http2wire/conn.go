package http2wire

import (
	"fmt"
	"slices"
)

const (
	settingHeaderTableSize = 0x1
	settingMaxFrameSize    = 0x5
)

// Conn parses both directions of one HTTP/2 connection. Create it with
// New. It is not safe for concurrent use.
type Conn struct {
	cfg     Config
	dirs    [2]direction
	streams map[uint32]*Stream
	// maxID is the highest stream id seen opening, by parity (index 1
	// for client-initiated odd ids): stream ids only grow, so a frame for
	// an unknown id at or below it belongs to a finished or dropped stream.
	maxID [2]uint32
	// refuseAbove is the last stream id of a GOAWAY, by parity of the
	// streams it refuses; refusing says whether one was seen.
	refuseAbove [2]uint32
	refusing    [2]bool

	at     int64
	stats  Stats
	events []Event
	// bodyHeld is what the bodies of open streams hold (MaxBodyBuffered).
	bodyHeld int
}

// New returns a Conn bounded by cfg (zero fields take the defaults).
func New(cfg Config) *Conn {
	c := &Conn{cfg: cfg.withDefaults(), streams: make(map[uint32]*Stream)}
	c.initDirection(&c.dirs[ClientToServer], ClientToServer)
	c.initDirection(&c.dirs[ServerToClient], ServerToClient)
	return c
}

// Feed parses the next in-order plaintext bytes of direction dir,
// captured at time at (Unix nanoseconds). The client's bytes must begin
// with the connection preface. The events returned are valid until the
// next call; the Streams they point to belong to the caller.
func (c *Conn) Feed(dir Dir, data []byte, at int64) []Event {
	c.events = c.events[:0]
	if dir > ServerToClient {
		return c.events
	}
	c.at = at
	d := &c.dirs[dir]
	c.stats.Bytes[dir] += int64(len(data))
	for len(data) > 0 && d.ph != phStopped {
		data = data[c.step(d, data):]
	}
	c.stats.Skipped[dir] += int64(len(data))
	return c.events
}

// Gap reports that the next n bytes of direction dir were never captured.
// HPACK state cannot survive lost header blocks and nothing marks frame
// boundaries in the byte stream, so the direction stops for good (a
// KindError event wrapping ErrGap): its open stream sides end incomplete.
// The other direction goes on.
func (c *Conn) Gap(dir Dir, n int64, at int64) []Event {
	c.events = c.events[:0]
	if dir > ServerToClient || n <= 0 {
		return c.events
	}
	c.at = at
	d := &c.dirs[dir]
	c.stats.Skipped[dir] += n
	if d.ph != phStopped {
		c.stats.Gaps++
		c.stop(d, fmt.Errorf("http2wire: %v: %d bytes at offset %d: %w", dir, n, d.off, ErrGap))
	}
	return c.events
}

// Close ends the connection at time at: the streams still open are
// emitted, flagged Incomplete unless both sides had ended, in id order.
func (c *Conn) Close(at int64) []Event {
	c.events = c.events[:0]
	c.at = at
	for _, id := range c.openIDs(func(*Stream) bool { return true }) {
		c.finish(c.streams[id])
	}
	return c.events
}

// Stats returns the connection's counters.
func (c *Conn) Stats() Stats { return c.stats }

// OpenStreams is the number of streams tracked and not yet emitted.
func (c *Conn) OpenStreams() int { return len(c.streams) }

// Err is why direction dir stopped; nil while it is parsed.
func (c *Conn) Err(dir Dir) error {
	if dir > ServerToClient {
		return nil
	}
	return c.dirs[dir].err
}

func (c *Conn) emit(ev Event) { c.events = append(c.events, ev) }

// side is the side of st that direction dir carries.
func (c *Conn) side(st *Stream, dir Dir) *Side {
	if dir == ClientToServer {
		return &st.Request.Side
	}
	return &st.Response.Side
}

// openStream starts tracking stream id, or counts it dropped when
// MaxStreams are open (its later frames are then ignored as the id is
// below maxID).
func (c *Conn) openStream(id uint32) *Stream {
	c.maxID[id&1] = max(c.maxID[id&1], id)
	if len(c.streams) >= c.cfg.MaxStreams {
		c.stats.StreamsDropped++
		return nil
	}
	st := &Stream{ID: id}
	st.Request.ContentLength, st.Response.ContentLength = -1, -1
	c.streams[id] = st
	c.stats.StreamsOpened++
	return st
}

// openPushed starts tracking a stream promised by PUSH_PROMISE.
func (c *Conn) openPushed(assoc, promised uint32) *Stream {
	if promised&1 == 1 || promised <= c.maxID[0] || c.streams[promised] != nil {
		return nil
	}
	st := c.openStream(promised)
	if st != nil {
		st.Pushed, st.AssociatedID = true, assoc
		c.stats.StreamsPushed++
	}
	return st
}

// tracked returns stream id, counting a frame for an untracked stream
// (finished, dropped or never opened) as ignored.
func (c *Conn) tracked(id uint32) *Stream {
	st := c.streams[id]
	if st == nil {
		c.stats.Ignored++
	}
	return st
}

func (c *Conn) onDataStart(d *direction, n int) {
	st := c.tracked(d.fh.streamID)
	if st == nil {
		return
	}
	side := c.side(st, d.dir)
	if side.StartAt == 0 || side.Ended || (d.dir == ClientToServer && !st.Request.Seen) {
		// DATA before HEADERS is a stream error; its bytes are no body.
		c.stats.Ignored++
		return
	}
	if n > 0 && side.FirstDataAt == 0 {
		side.FirstDataAt = d.startAt
	}
}

// onData takes DATA payload bytes, padding excluded (the frame parser
// skips padding in a phase of its own).
func (c *Conn) onData(d *direction, b []byte) {
	st := c.streams[d.fh.streamID]
	if st == nil {
		return
	}
	side := c.side(st, d.dir)
	if side.StartAt != 0 && !side.Ended && (d.dir == ServerToClient || st.Request.Seen) {
		side.BodyBytes += int64(len(b))
		if d.dir == ServerToClient && st.Response.keepBody {
			c.keepBody(&st.Response, b)
		}
	}
}

// keepBody appends what the bounds allow of b to r's body; past them the
// body is cut and keeps nothing more, as a body with a hole is only good
// up to the hole.
func (c *Conn) keepBody(r *Response, b []byte) {
	if r.BodyCut || len(b) == 0 {
		return
	}
	n := max(min(len(b), c.cfg.MaxBodyLen-len(r.Body), c.cfg.MaxBodyBuffered-c.bodyHeld), 0)
	if n > 0 && c.cfg.Reserve != nil {
		n = max(min(c.cfg.Reserve(n), n), 0)
	}
	if n < len(b) {
		r.BodyCut, r.BodyLimited = true, true
		c.stats.BodiesCut++
	}
	r.Body = append(r.Body, b[:n]...)
	c.bodyHeld += n
}

// endSide ends the side of stream id that direction d carries, on
// END_STREAM, and finishes the stream when both sides are done.
func (c *Conn) endSide(d *direction, id uint32) {
	st := c.streams[id]
	if st == nil {
		return
	}
	side := c.side(st, d.dir)
	if side.StartAt == 0 || side.Ended {
		return
	}
	side.Ended, side.EndAt = true, c.at
	c.finishIfDone(st)
}

// finishIfDone finishes st when neither side can add to it any more.
func (c *Conn) finishIfDone(st *Stream) {
	if c.isRefused(st) {
		st.Refused = true
		c.finish(st)
		return
	}
	if c.sideOpen(st, ClientToServer) || c.sideOpen(st, ServerToClient) {
		return
	}
	c.finish(st)
}

// sideOpen reports whether direction dir may still add to st.
func (c *Conn) sideOpen(st *Stream, dir Dir) bool {
	if c.dirs[dir].ph == phStopped {
		return false
	}
	if dir == ClientToServer {
		return st.Request.Seen && !st.Request.Ended
	}
	return !st.Response.Ended
}

func (c *Conn) isRefused(st *Stream) bool {
	p := st.ID & 1
	return c.refusing[p] && st.ID > c.refuseAbove[p]
}

// finish emits st and stops tracking it.
func (c *Conn) finish(st *Stream) {
	delete(c.streams, st.ID)
	c.bodyHeld -= len(st.Response.Body)
	if st.Response.keepBody && !st.Response.Ended {
		st.Response.BodyCut = true // the rest of it never came
	}
	st.Incomplete = st.Reset == nil && !st.Refused &&
		!((st.Request.Ended || !st.Request.Seen && c.dirs[ClientToServer].ph == phStopped) && st.Response.Ended)
	c.stats.StreamsCompleted++
	switch {
	case st.Reset != nil:
		c.stats.StreamsReset++
	case st.Refused:
		c.stats.StreamsRefused++
	case st.Incomplete:
		c.stats.StreamsIncomplete++
	}
	c.emit(Event{Kind: KindStream, Dir: c.dirOf(st), At: c.at, Stream: st})
}

// dirOf is the direction that initiated st.
func (c *Conn) dirOf(st *Stream) Dir {
	if st.ID&1 == 1 {
		return ClientToServer
	}
	return ServerToClient
}

// openIDs lists the ids of tracked streams that keep reports, in order,
// so that events come out deterministically.
func (c *Conn) openIDs(keep func(*Stream) bool) []uint32 {
	var ids []uint32
	for id, st := range c.streams {
		if keep(st) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// directionLost finishes the streams that were waiting only on the
// direction that just stopped.
func (c *Conn) directionLost() {
	for _, id := range c.openIDs(func(*Stream) bool { return true }) {
		c.finishIfDone(c.streams[id])
	}
}

func (c *Conn) onPriority(id uint32, p Priority) {
	if st := c.tracked(id); st != nil && p.Dependency != id {
		st.Priority = p
	}
}

func (c *Conn) onReset(d *direction, id, code uint32) {
	st := c.tracked(id)
	if st == nil {
		return
	}
	st.Reset = &Reset{By: d.dir, Code: code, At: c.at}
	c.finish(st)
}

// onGoAway reports a GOAWAY and refuses the streams above its last id
// that its sender's peer initiated.
func (c *Conn) onGoAway(d *direction, g GoAway) {
	c.emit(Event{Kind: KindGoAway, Dir: d.dir, At: c.at, GoAway: g})
	p := uint32(1) // the server refuses client-initiated (odd) streams
	if d.dir == ClientToServer {
		p = 0
	}
	if c.refusing[p] && g.LastStreamID >= c.refuseAbove[p] {
		return // refuses nothing new
	}
	c.refusing[p], c.refuseAbove[p] = true, g.LastStreamID
	for _, id := range c.openIDs(func(st *Stream) bool { return st.ID&1 == p && c.isRefused(st) }) {
		c.finishIfDone(c.streams[id])
	}
}

// onSetting applies a setting that direction d announced: it governs
// what the other direction may send.
func (c *Conn) onSetting(d *direction, id uint16, v uint32) {
	peer := &c.dirs[1-d.dir]
	switch id {
	case settingHeaderTableSize:
		// The largest size seen is allowed, so that how the caller
		// interleaves the directions cannot fail a valid size update.
		v = min(v, c.cfg.MaxHeaderTableSize)
		if v > peer.tableLimit {
			peer.tableLimit = v
			peer.dec.SetAllowedMaxDynamicTableSize(v)
		}
	case settingMaxFrameSize:
		if v >= defaultMaxFrame && v <= maxFrameSizeCap && v > peer.maxFrame {
			peer.maxFrame = v
		}
	}
}
