package http2wire

import (
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"
)

// blockRole says what a header block is for.
type blockRole uint8

const (
	roleIgnore   blockRole = iota // decoded only to keep the HPACK state
	roleRequest                   // request headers, or a promised request
	roleResponse                  // response headers (1xx or final)
	roleTrailers                  // trailers of the side
)

// headerBlock is the header block being decoded in one direction, from a
// HEADERS or PUSH_PROMISE frame through its CONTINUATIONs.
type headerBlock struct {
	cfg       *Config
	active    bool
	streamID  uint32
	role      blockRole
	st        *Stream
	endStream bool
	startAt   int64 // time of the first byte of the opening frame

	// Fields of the block as decoded, bounded by the Config.
	fields    int
	size      int
	truncated bool
	pseudo    map[string]string
	regular   []Field // the fields applyRequest and applyResponse read; every field of trailers
}

// onField receives each decoded field; the decoder calls it only from
// writeBlock and closeBlock.
func (d *direction) onField(f hpack.HeaderField) {
	b := &d.block
	b.fields++
	b.size += len(f.Name) + len(f.Value) + 32
	if b.role == roleIgnore {
		return
	}
	if b.fields > b.cfg.MaxHeaders || b.size > b.cfg.MaxHeaderListSize {
		b.truncated = true
		return
	}
	if f.IsPseudo() {
		if b.pseudo == nil {
			b.pseudo = make(map[string]string, 5)
		}
		b.pseudo[f.Name] = b.clip(f.Value)
		return
	}
	keep := b.role == roleTrailers
	switch f.Name {
	case "content-type", "content-length", "user-agent", "referer", "accept", "sec-fetch-dest",
		"location", "content-encoding":
		keep = true
	}
	if !keep {
		return
	}
	if b.role == roleTrailers && len(b.regular) >= MaxTrailers {
		b.truncated = true
		return
	}
	b.regular = append(b.regular, Field{Name: b.clip(f.Name), Value: b.clip(f.Value)})
}

// clip bounds a retained string, copying it so that it does not pin a
// larger decoded buffer.
func (b *headerBlock) clip(s string) string {
	if len(s) <= b.cfg.MaxValueLen {
		return s
	}
	b.truncated = true
	return strings.Clone(s[:b.cfg.MaxValueLen])
}

func (b *headerBlock) get(name string) string {
	for _, f := range b.regular {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// openBlock starts the header block of a HEADERS frame (promised == 0) or
// a PUSH_PROMISE frame, deciding which stream and side it belongs to.
func (c *Conn) openBlock(d *direction, streamID, promised uint32, prio Priority) {
	d.block = headerBlock{cfg: &c.cfg, active: true, streamID: streamID,
		endStream: d.fh.typ == FrameHeaders && d.fh.has(flagEndStream), startAt: d.startAt}
	b := &d.block
	switch {
	case promised != 0:
		b.st, b.role = c.openPushed(streamID, promised), roleRequest
	case d.dir == ClientToServer:
		b.st, b.role = c.requestTarget(streamID)
	default:
		b.st, b.role = c.responseTarget(streamID)
	}
	// Ignored blocks are still decoded, to keep the HPACK table in step.
	d.dec.SetEmitEnabled(b.st != nil)
	if b.st == nil {
		b.role = roleIgnore
		c.stats.Ignored++
		return
	}
	if b.role == roleResponse && b.st.Request.StartAt > b.startAt {
		// A response cannot begin before its request did; when the
		// capture says so (the directions' timestamps are skewed) the
		// request's start is the best bound.
		b.startAt = b.st.Request.StartAt
		c.stats.Clamped++
	}
	if prio.Set && prio.Dependency != streamID {
		b.st.Priority = prio
	}
	side := c.side(b.st, d.dir)
	if promised != 0 {
		side = &b.st.Request.Side
	}
	if side.StartAt == 0 {
		side.StartAt = b.startAt
	}
}

// requestTarget finds the stream a client HEADERS frame belongs to.
func (c *Conn) requestTarget(id uint32) (*Stream, blockRole) {
	st := c.streams[id]
	switch {
	case st == nil && id&1 == 1 && id > c.maxID[1]:
		return c.openStream(id), roleRequest
	case st == nil || !st.Request.Seen || st.Request.Ended:
		// A request the server side opened first is not believed:
		// requests precede their responses.
		return nil, roleIgnore
	}
	return st, roleTrailers
}

// responseTarget finds the stream a server HEADERS frame belongs to.
func (c *Conn) responseTarget(id uint32) (*Stream, blockRole) {
	st := c.streams[id]
	switch {
	case st == nil && id > c.maxID[id&1]:
		// The client's direction was lost or its request never seen.
		return c.openStream(id), roleResponse
	case st == nil || st.Response.Ended:
		return nil, roleIgnore
	case st.Response.Status == 0:
		return st, roleResponse
	}
	return st, roleTrailers
}

// writeBlock feeds a fragment of the header block to the HPACK decoder.
func (c *Conn) writeBlock(d *direction, frag []byte) {
	if len(frag) == 0 {
		return
	}
	// The other direction may have reset or refused the stream meanwhile;
	// an emitted Stream belongs to the caller and is not touched.
	if st := d.block.st; st != nil && c.streams[st.ID] == st {
		side := c.side(d.block.st, d.dir)
		if d.block.role == roleRequest {
			side = &d.block.st.Request.Side
		}
		side.HeaderBytes += int64(len(frag))
	}
	if _, err := d.dec.Write(frag); err != nil {
		c.stop(d, fmt.Errorf("http2wire: %v header block of stream %d: %w: %w", d.dir, d.block.streamID, ErrHPACK, err))
	}
}

// closeBlock ends the header block and applies it to its stream.
func (c *Conn) closeBlock(d *direction) {
	b := &d.block
	b.active = false
	if err := d.dec.Close(); err != nil {
		c.stop(d, fmt.Errorf("http2wire: %v header block of stream %d: %w: %w", d.dir, b.streamID, ErrHPACK, err))
		return
	}
	st := b.st
	if st == nil || c.streams[st.ID] != st {
		return // ignored, or finished (reset, refused) meanwhile
	}
	if b.truncated {
		st.Truncated = true
	}
	endStream := b.endStream
	switch b.role {
	case roleRequest:
		c.applyRequest(st, b)
		if st.Pushed {
			// A promised request has no body: it ends with its headers.
			st.Request.Ended, st.Request.EndAt = true, c.at
		}
	case roleResponse:
		if !c.applyResponse(st, b) {
			endStream = false // 1xx: the headers phase goes on
		}
	case roleTrailers:
		c.side(st, d.dir).Trailers = b.regular
	}
	if endStream {
		c.endSide(d, st.ID)
		return
	}
	c.finishIfDone(st)
}

func (c *Conn) applyRequest(st *Stream, b *headerBlock) {
	r := &st.Request
	r.Seen = true
	r.Method, r.Scheme = b.pseudo[":method"], b.pseudo[":scheme"]
	r.Authority, r.Path = b.pseudo[":authority"], b.pseudo[":path"]
	r.Protocol = b.pseudo[":protocol"]
	r.UserAgent, r.ContentType = b.get("user-agent"), b.get("content-type")
	r.ContentLength = parseLength(b.get("content-length"))
	r.Referer, r.Accept, r.SecFetchDest = b.get("referer"), b.get("accept"), b.get("sec-fetch-dest")
}

// applyResponse records response headers and reports whether they were
// final (not 1xx).
func (c *Conn) applyResponse(st *Stream, b *headerBlock) bool {
	r := &st.Response
	status, err := strconv.Atoi(b.pseudo[":status"])
	if err != nil || status < 100 || status > 999 {
		status = 0
	}
	if status >= 100 && status < 200 {
		if len(r.Informational) < maxInformational {
			r.Informational = append(r.Informational, Informational{Status: status, At: b.startAt})
		} else {
			st.Truncated = true
		}
		return false
	}
	if status == 0 {
		// A response without a valid status still ends the headers phase:
		// what follows is its body.
		st.Truncated = true
		status = -1
	}
	r.Status = status
	r.FinalHeadersAt = b.startAt
	r.ContentType = b.get("content-type")
	r.ContentLength = parseLength(b.get("content-length"))
	r.Location, r.ContentEncoding = b.get("location"), b.get("content-encoding")
	r.keepBody = c.cfg.WantBody != nil && c.cfg.WantBody(status, r.ContentType)
	return true
}

func parseLength(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if s == "" || err != nil || n < 0 {
		return -1
	}
	return n
}
