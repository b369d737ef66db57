package http2wire

import (
	"errors"
	"strconv"
)

// Dir is a direction of the connection.
type Dir uint8

// The two directions.
const (
	ClientToServer Dir = 0
	ServerToClient Dir = 1
)

func (d Dir) String() string {
	switch d {
	case ClientToServer:
		return "client->server"
	case ServerToClient:
		return "server->client"
	}
	return "dir(" + strconv.Itoa(int(d)) + ")"
}

// FrameType is an HTTP/2 frame type (RFC 9113 6).
type FrameType uint8

// Frame types the parser knows; others are skipped.
const (
	FrameData         FrameType = 0x0
	FrameHeaders      FrameType = 0x1
	FramePriority     FrameType = 0x2
	FrameRSTStream    FrameType = 0x3
	FrameSettings     FrameType = 0x4
	FramePushPromise  FrameType = 0x5
	FramePing         FrameType = 0x6
	FrameGoAway       FrameType = 0x7
	FrameWindowUpdate FrameType = 0x8
	FrameContinuation FrameType = 0x9

	// NumFrameTypes is the number of known frame types, the size of
	// Stats.Frames' inner array.
	NumFrameTypes = 10
)

var frameNames = [NumFrameTypes]string{"DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS",
	"PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION"}

func (t FrameType) String() string {
	if int(t) < NumFrameTypes {
		return frameNames[t]
	}
	return "UNKNOWN(" + strconv.Itoa(int(t)) + ")"
}

// Kind says what an Event reports.
type Kind uint8

const (
	// KindStream: a stream ended, was reset or refused, or was flushed
	// incomplete (Event.Stream).
	KindStream Kind = iota + 1
	// KindGoAway: a GOAWAY frame (Event.GoAway).
	KindGoAway
	// KindError: parsing of direction Event.Dir stopped for good
	// (Event.Err wraps ErrPreface, ErrFrameSize, ErrProtocol, ErrHPACK or
	// ErrGap).
	KindError
)

func (k Kind) String() string {
	switch k {
	case KindStream:
		return "stream"
	case KindGoAway:
		return "goaway"
	case KindError:
		return "error"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Errors a Conn reports; match them with errors.Is.
var (
	// ErrPreface: the client's bytes do not begin with the connection preface.
	ErrPreface = errors.New("bad HTTP/2 connection preface")
	// ErrFrameSize: a frame is longer than the receiver allows, or a
	// fixed-size frame has the wrong length.
	ErrFrameSize = errors.New("bad frame size")
	// ErrProtocol: frames that break RFC 9113 framing rules.
	ErrProtocol = errors.New("HTTP/2 protocol error")
	// ErrHPACK: a header block does not decode; the direction's HPACK
	// state is lost.
	ErrHPACK = errors.New("header block does not decode")
	// ErrGap: bytes of the direction were never captured.
	ErrGap = errors.New("bytes missing from the capture")
)

// Event is one thing a Conn learned. At is the capture time of the Feed
// (or Gap, Close) call that produced it. Dir is the direction that sent
// the GOAWAY or stopped; for KindStream, the one that initiated the
// stream (server for pushed streams).
type Event struct {
	Kind   Kind
	Dir    Dir
	At     int64
	Stream *Stream // KindStream; the caller owns it
	GoAway GoAway  // KindGoAway
	Err    error   // KindError
}

// GoAway is the content of a GOAWAY frame.
type GoAway struct {
	LastStreamID uint32
	Code         uint32
}

// Priority is the RFC 7540 priority signal of a stream, from its HEADERS
// or a PRIORITY frame (the last one seen wins).
type Priority struct {
	Set        bool
	Dependency uint32
	Weight     uint8 // as on the wire: the weight minus one
	Exclusive  bool
}

// Reset is a RST_STREAM that ended a stream.
type Reset struct {
	By   Dir // who sent it
	Code uint32
	At   int64
}

// Field is one retained header field.
type Field struct {
	Name, Value string
}

// Side is one direction of a stream. Times are capture times; zero means
// not seen.
type Side struct {
	// StartAt is the time of the first byte of the side's first HEADERS
	// frame (PUSH_PROMISE for a pushed request).
	StartAt int64
	// FirstDataAt is the time of the first byte of the first DATA frame
	// carrying body bytes.
	FirstDataAt int64
	// EndAt is the time of the last byte of the frame that ended the side
	// (END_STREAM, or the end of its header block).
	EndAt int64
	// Ended: END_STREAM was seen.
	Ended bool
	// BodyBytes counts DATA payload bytes, padding excluded.
	BodyBytes int64
	// HeaderBytes counts compressed header block bytes.
	HeaderBytes int64
	// Trailers are the fields of a trailing header block, at most
	// MaxTrailers of them.
	Trailers []Field
}

// MaxTrailers bounds the trailer fields retained per side.
const MaxTrailers = 32

// maxInformational bounds the 1xx responses retained per stream.
const maxInformational = 8

// Request is the client side of a stream (for a pushed stream, the request
// the server promised).
type Request struct {
	Side
	// Seen: the request's header block was seen. It is false for a stream
	// first seen on the server's side, after the client's direction was
	// lost.
	Seen                            bool
	Method, Scheme, Authority, Path string
	Protocol                        string // :protocol (extended CONNECT)
	UserAgent, ContentType          string
	ContentLength                   int64 // -1 when absent or unparsable
	// Referer, Accept and SecFetchDest (Sec-Fetch-Dest) tell a page's
	// objects from its navigations and name the page they belong to.
	Referer, Accept, SecFetchDest string
}

// Informational is a 1xx response.
type Informational struct {
	Status int
	At     int64 // time of the first byte of its HEADERS frame
}

// Response is the server side of a stream.
type Response struct {
	Side
	// Status is the final (non-1xx) status; 0 when none was seen, -1
	// when the final headers had no valid :status.
	Status int
	// FinalHeadersAt is the time of the first byte of the HEADERS frame
	// with the final status (Side.StartAt also counts 1xx responses).
	FinalHeadersAt int64
	Informational  []Informational // at most 8
	ContentType    string
	ContentLength  int64 // -1 when absent or unparsable
	// Location (of a redirect) and ContentEncoding (how Body is coded).
	Location, ContentEncoding string
	// Body is the DATA payload (padding excluded, content coding not
	// undone) of a final response Config.WantBody asked for, within
	// MaxBodyLen, MaxBodyBuffered and Reserve. BodyCut: bytes of it are
	// missing, because a bound cut it (BodyLimited too) or because the
	// stream ended before the response did (reset, refused, a direction
	// lost, the connection closed).
	Body                 []byte
	BodyCut, BodyLimited bool
	// keepBody: WantBody asked for this response's body.
	keepBody bool
}

// Stream is the record of one HTTP/2 stream, emitted once.
type Stream struct {
	ID       uint32
	Request  Request
	Response Response
	Priority Priority
	// Pushed: a server-initiated stream announced by PUSH_PROMISE on
	// stream AssociatedID.
	Pushed       bool
	AssociatedID uint32
	Reset        *Reset // non-nil when RST_STREAM ended the stream
	// Refused: the stream's id is above the last stream id of a GOAWAY
	// from its receiver, which therefore did not process it.
	Refused bool
	// Incomplete: neither side's END_STREAM nor a reset or refusal ended
	// it: the connection was flushed or a direction was lost first.
	Incomplete bool
	// Truncated: header values were cut or fields dropped by the bounds.
	Truncated bool
}

// Stats counts what a Conn did. Frames and bytes are per direction.
type Stats struct {
	Frames        [2][NumFrameTypes]int64
	UnknownFrames [2]int64
	Bytes         [2]int64 // bytes fed, gaps excluded
	Skipped       [2]int64 // bytes fed or lost after a direction stopped, gaps included
	// ProtocolErrors counts directions stopped by bad preface, frame size,
	// protocol or HPACK errors; Gaps those stopped by a gap.
	ProtocolErrors int
	Gaps           int
	// Ignored counts frames for streams not tracked (dropped, finished,
	// never opened) and frames out of place (DATA before HEADERS).
	Ignored int64
	// Clamped counts response header blocks whose frame began before
	// their request's; their start is taken as the request's.
	Clamped int64

	StreamsOpened     int64 // streams tracked
	StreamsCompleted  int64 // streams emitted, for whatever reason
	StreamsReset      int64
	StreamsRefused    int64
	StreamsPushed     int64
	StreamsIncomplete int64
	// StreamsDropped counts new streams not tracked because MaxStreams
	// were open.
	StreamsDropped int64
	// BodiesCut counts response bodies cut by MaxBodyLen,
	// MaxBodyBuffered or Reserve.
	BodiesCut int64
}

// Config bounds a Conn. Zero fields take the defaults.
type Config struct {
	// MaxStreams bounds the streams tracked at once (default 1024).
	MaxStreams int
	// MaxHeaderListSize bounds the decoded size of one header block
	// (names, values and 32 bytes each, as in RFC 9113) that is examined;
	// it also bounds a single HPACK string, whose excess is an ErrHPACK
	// (default 64 KiB).
	MaxHeaderListSize int
	// MaxHeaders bounds the fields of one header block examined (default 256).
	MaxHeaders int
	// MaxValueLen bounds a retained header value (default 8 KiB).
	MaxValueLen int
	// MaxHeaderTableSize bounds the HPACK dynamic table size a peer may
	// use; a larger size update is an ErrHPACK (default 64 KiB).
	MaxHeaderTableSize uint32

	// WantBody, when set, is asked about each final response (status -1
	// when invalid): true keeps its body in Response.Body. Bodies are
	// captured data, so they are bounded three ways: MaxBodyLen per body
	// (default 256 KiB), MaxBodyBuffered over the bodies of the streams
	// open at once (default 4 MiB), and Reserve.
	WantBody        func(status int, contentType string) bool
	MaxBodyLen      int
	MaxBodyBuffered int
	// Reserve, when set, is asked before n more body bytes are kept and
	// returns how many of them may be (fewer cut the body): it lets the
	// caller share one budget between connections. The bytes it grants
	// are the caller's to count until it is done with the emitted Stream;
	// a Conn never gives them back, so a caller that counts them must
	// Close the Conn to have every Stream emitted.
	Reserve func(n int) int
}

func (c Config) withDefaults() Config {
	if c.MaxStreams <= 0 {
		c.MaxStreams = 1024
	}
	if c.MaxHeaderListSize <= 0 {
		c.MaxHeaderListSize = 64 << 10
	}
	if c.MaxHeaders <= 0 {
		c.MaxHeaders = 256
	}
	if c.MaxValueLen <= 0 {
		c.MaxValueLen = 8 << 10
	}
	if c.MaxHeaderTableSize == 0 {
		c.MaxHeaderTableSize = 64 << 10
	}
	if c.MaxBodyLen <= 0 {
		c.MaxBodyLen = 256 << 10
	}
	if c.MaxBodyBuffered <= 0 {
		c.MaxBodyBuffered = 4 << 20
	}
	return c
}
