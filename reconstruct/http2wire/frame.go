package http2wire

import (
	"errors"
	"fmt"

	"golang.org/x/net/http2/hpack"
)

const (
	// ClientPreface opens the client's side of every HTTP/2 connection.
	ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	frameHeaderLen   = 9
	defaultMaxFrame  = 1 << 14
	maxFrameSizeCap  = 1<<24 - 1
	defaultTableSize = 4096

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20

	streamIDMask = 1<<31 - 1
)

type phase uint8

const (
	phPreface phase = iota // matching the client preface
	phHeader               // reading a 9-byte frame header
	phPrefix               // reading the fixed fields at the start of a frame body
	phContent              // reading the body proper (remain bytes left)
	phPadding              // skipping padding (remain bytes left)
	phStopped              // parsing stopped for good (err says why)
)

// frameHeader is a parsed 9-byte frame header.
type frameHeader struct {
	length   uint32
	typ      FrameType
	flags    uint8
	streamID uint32
}

func (h frameHeader) has(f uint8) bool { return h.flags&f != 0 }

// direction is the framing and HPACK state of one direction.
type direction struct {
	dir      Dir
	ph       phase
	err      error
	off      int64 // stream offset of the next byte
	prefaceN int

	hdr     [frameHeaderLen]byte
	hdrN    int
	fh      frameHeader
	startAt int64 // time of the first byte of the current frame

	pre    [8]byte // fixed fields: pad length, priority, promised id, codes
	preN   int
	preLen int
	padLen int
	remain int

	setting  [6]byte // a SETTINGS entry split across Feed calls
	settingN int

	// maxFrame is the largest frame the receiver of this direction
	// announced (never below the default; the largest seen, so that the
	// order in which the caller interleaves directions cannot matter).
	maxFrame   uint32
	dec        *hpack.Decoder
	tableLimit uint32
	block      headerBlock
}

func (c *Conn) initDirection(d *direction, dir Dir) {
	d.dir = dir
	d.ph = phHeader
	if dir == ClientToServer {
		d.ph = phPreface
	}
	d.maxFrame = defaultMaxFrame
	d.tableLimit = defaultTableSize
	d.dec = hpack.NewDecoder(defaultTableSize, d.onField)
	d.dec.SetMaxStringLength(c.cfg.MaxHeaderListSize)
	d.block.cfg = &c.cfg
}

// step consumes a prefix of data (at least one byte) and returns its length.
func (c *Conn) step(d *direction, data []byte) int {
	var n int
	switch d.ph {
	case phPreface:
		n = min(len(data), len(ClientPreface)-d.prefaceN)
		if string(data[:n]) != ClientPreface[d.prefaceN:d.prefaceN+n] {
			c.stop(d, fmt.Errorf("http2wire: %v at offset %d: %w", d.dir, d.off, ErrPreface))
			return 0
		}
		d.prefaceN += n
		if d.prefaceN == len(ClientPreface) {
			d.ph = phHeader
		}
	case phHeader:
		if d.hdrN == 0 {
			d.startAt = c.at
		}
		n = copy(d.hdr[d.hdrN:], data)
		d.hdrN += n
		if d.hdrN == frameHeaderLen {
			d.off += int64(n)
			c.beginFrame(d)
			return n
		}
	case phPrefix:
		n = copy(d.pre[d.preN:d.preLen], data)
		d.preN += n
	case phContent:
		n = min(len(data), d.remain)
		d.remain -= n
		c.content(d, data[:n])
	case phPadding:
		n = min(len(data), d.remain)
		d.remain -= n
	}
	d.off += int64(n)
	c.advance(d)
	return n
}

// advance moves through the phases of the current frame whose remaining
// length is zero, ending the frame when all are done.
func (c *Conn) advance(d *direction) {
	for {
		switch d.ph {
		case phPrefix:
			if d.preN < d.preLen {
				return
			}
			c.afterPrefix(d)
		case phContent:
			if d.remain > 0 {
				return
			}
			d.ph, d.remain = phPadding, d.padLen
		case phPadding:
			if d.remain > 0 {
				return
			}
			c.endFrame(d)
			if d.ph == phPadding {
				d.ph, d.hdrN = phHeader, 0
			}
			return
		default:
			return
		}
	}
}

// beginFrame checks a complete frame header and sets up reading its body.
func (c *Conn) beginFrame(d *direction) {
	h := d.hdr[:]
	d.fh = frameHeader{
		length:   uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2]),
		typ:      FrameType(h[3]),
		flags:    h[4],
		streamID: (uint32(h[5])<<24 | uint32(h[6])<<16 | uint32(h[7])<<8 | uint32(h[8])) & streamIDMask,
	}
	if int(d.fh.typ) < NumFrameTypes {
		c.stats.Frames[d.dir][d.fh.typ]++
	} else {
		c.stats.UnknownFrames[d.dir]++
	}
	if err := d.checkFrame(); err != nil {
		c.stop(d, fmt.Errorf("http2wire: %v %v frame on stream %d at offset %d: %w",
			d.dir, d.fh.typ, d.fh.streamID, d.off-frameHeaderLen, err))
		return
	}
	d.preN, d.preLen, d.padLen, d.settingN = 0, d.prefixLen(), 0, 0
	d.ph = phPrefix
	c.advance(d)
}

// prefixLen is the length of the fixed fields at the start of the body.
func (d *direction) prefixLen() int {
	fh := d.fh
	n := 0
	switch fh.typ {
	case FrameData, FrameHeaders, FramePushPromise:
		if fh.has(flagPadded) {
			n = 1
		}
		if fh.typ == FrameHeaders && fh.has(flagPriority) {
			n += 5
		}
		if fh.typ == FramePushPromise {
			n += 4
		}
	case FramePriority:
		n = 5
	case FrameRSTStream, FrameWindowUpdate:
		n = 4
	case FramePing, FrameGoAway:
		n = 8
	}
	return n
}

// checkFrame applies the framing rules of RFC 9113 that, broken, would
// leave the parser unable to follow the connection.
func (d *direction) checkFrame() error {
	fh := d.fh
	if fh.length > d.maxFrame {
		return fmt.Errorf("%w: length %d over %d", ErrFrameSize, fh.length, d.maxFrame)
	}
	if d.block.active && (fh.typ != FrameContinuation || fh.streamID != d.block.streamID) {
		return fmt.Errorf("%w: header block of stream %d not continued", ErrProtocol, d.block.streamID)
	}
	if int(fh.length) < d.prefixLen() {
		return fmt.Errorf("%w: length %d shorter than its fixed fields", ErrFrameSize, fh.length)
	}
	switch fh.typ {
	case FrameData, FrameHeaders, FramePriority, FrameRSTStream, FramePushPromise, FrameContinuation:
		if fh.streamID == 0 {
			return fmt.Errorf("%w: on stream 0", ErrProtocol)
		}
	case FrameSettings, FramePing, FrameGoAway:
		if fh.streamID != 0 {
			return fmt.Errorf("%w: on a stream", ErrProtocol)
		}
	}
	switch fh.typ {
	case FramePriority, FrameRSTStream, FrameWindowUpdate, FramePing:
		if int(fh.length) != d.prefixLen() {
			return fmt.Errorf("%w: length %d", ErrFrameSize, fh.length)
		}
	case FrameSettings:
		if fh.length%6 != 0 || fh.has(flagAck) && fh.length != 0 {
			return fmt.Errorf("%w: length %d", ErrFrameSize, fh.length)
		}
	case FramePushPromise:
		if d.dir != ServerToClient {
			return fmt.Errorf("%w: sent by the client", ErrProtocol)
		}
	case FrameContinuation:
		if !d.block.active {
			return fmt.Errorf("%w: no header block to continue", ErrProtocol)
		}
	}
	return nil
}

// afterPrefix acts on the fixed fields and sets up the content phase.
func (c *Conn) afterPrefix(d *direction) {
	fh := d.fh
	p := d.pre[:]
	rest := int(fh.length) - d.preLen
	if fh.has(flagPadded) && (fh.typ == FrameData || fh.typ == FrameHeaders || fh.typ == FramePushPromise) {
		d.padLen = int(p[0])
		p = p[1:]
		if d.padLen > rest {
			c.stop(d, fmt.Errorf("http2wire: %v %v frame on stream %d at offset %d: %w: padding %d over length",
				d.dir, fh.typ, fh.streamID, d.off, ErrProtocol, d.padLen))
			return
		}
		rest -= d.padLen
	}
	d.ph, d.remain = phContent, rest
	switch fh.typ {
	case FrameData:
		c.onDataStart(d, rest)
	case FrameHeaders:
		var prio Priority
		if fh.has(flagPriority) {
			prio = parsePriority(p)
		}
		c.openBlock(d, fh.streamID, 0, prio)
	case FramePushPromise:
		c.openBlock(d, fh.streamID, be32(p)&streamIDMask, Priority{})
	case FramePriority:
		c.onPriority(fh.streamID, parsePriority(p))
	case FrameRSTStream:
		c.onReset(d, fh.streamID, be32(p))
	case FrameGoAway:
		c.onGoAway(d, GoAway{LastStreamID: be32(p) & streamIDMask, Code: be32(p[4:])})
	}
}

// content handles body bytes after the fixed fields, padding excluded.
func (c *Conn) content(d *direction, b []byte) {
	switch d.fh.typ {
	case FrameData:
		c.onData(d, b)
	case FrameHeaders, FramePushPromise, FrameContinuation:
		c.writeBlock(d, b)
	case FrameSettings:
		for len(b) > 0 {
			n := copy(d.setting[d.settingN:], b)
			d.settingN += n
			b = b[n:]
			if d.settingN == len(d.setting) {
				d.settingN = 0
				c.onSetting(d, uint16(d.setting[0])<<8|uint16(d.setting[1]), be32(d.setting[2:]))
			}
		}
	}
}

// endFrame acts on a frame whose last byte arrived.
func (c *Conn) endFrame(d *direction) {
	fh := d.fh
	switch fh.typ {
	case FrameData:
		if fh.has(flagEndStream) {
			c.endSide(d, fh.streamID)
		}
	case FrameHeaders, FramePushPromise, FrameContinuation:
		if fh.has(flagEndHeaders) {
			c.closeBlock(d)
		}
	}
}

func parsePriority(p []byte) Priority {
	dep := be32(p)
	return Priority{Set: true, Dependency: dep & streamIDMask, Exclusive: dep>>31 == 1, Weight: p[4]}
}

func be32(p []byte) uint32 {
	return uint32(p[0])<<24 | uint32(p[1])<<16 | uint32(p[2])<<8 | uint32(p[3])
}

// stop ends parsing of the direction for good.
func (c *Conn) stop(d *direction, err error) {
	if d.ph == phStopped {
		return
	}
	d.ph, d.err = phStopped, err
	d.block = headerBlock{cfg: d.block.cfg}
	if !errors.Is(err, ErrGap) {
		c.stats.ProtocolErrors++
	}
	c.emit(Event{Kind: KindError, Dir: d.dir, At: c.at, Err: err})
	c.directionLost()
}
