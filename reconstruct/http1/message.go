// Package http1 is an incremental, passive HTTP/1.0 and HTTP/1.1 message
// parser for captured TCP streams.
//
// One Parser follows one direction of one connection. The caller feeds the
// direction's bytes in stream order (Feed), reports bytes that were never
// captured (Gap) and the peer's close (Close). The parser reports message
// boundaries as stream byte offsets (0 = first payload byte of the
// direction), which the caller maps to capture times and sequence numbers.
//
// Everything parsed is untrusted: memory per Parser is bounded by the header
// limit, bodies are skipped by arithmetic, and malformed input makes the
// parser report Desync and hunt for the next plausible message start instead
// of failing.
//
// Framing follows RFC 9112 section 6.3: chunked Transfer-Encoding wins over
// Content-Length; a response without either is close-delimited (ended by
// Close); a request without either has no body; responses to HEAD and
// 1xx/204/304 responses have no body; 101 and 2xx-to-CONNECT end HTTP on
// the response stream (the caller switches the request parser with
// SwitchToOpaque). Interim 1xx responses are reported as messages with
// Interim set; the next response answers the same request.
//
// Resync: after garbage, a gap outside a known-length body, or a framing
// error, the parser skips to a line beginning that starts a plausible
// start line: "HTTP/1.d ddd" for responses; for requests a standard method
// (GET HEAD POST PUT DELETE OPTIONS PATCH CONNECT TRACE), SP, a target and
// " HTTP/1.d" ending the line. In sync, any token is accepted as a method.
//
// Timing: MessageStart is called once the start line is complete, so for a
// start line split across segments m.Start lies in an earlier Feed (by less
// than the header limit). HeadersDone and MessageEnd are called during the
// Feed (or Gap, Close) that contains HeaderEnd and End. Callers that map
// offsets to capture times should therefore map m.Start by offset (e.g.
// via sequence numbers), not "now".
package http1

// Kind is the direction a Parser follows.
type Kind uint8

const (
	Request  Kind = iota // client -> server
	Response             // server -> client
)

func (k Kind) String() string {
	if k == Request {
		return "request"
	}
	return "response"
}

// Limits on extracted values; longer values are cut and Message.Truncated is set.
const (
	MaxURLLen   = 2048
	MaxValueLen = 512
	// MaxPendingMethods bounds the request-method FIFO of a response parser.
	MaxPendingMethods = 64
	// DefaultMaxHeaderBytes is a header limit matching common servers.
	DefaultMaxHeaderBytes = 16 << 10
	// MinMaxHeaderBytes is the smallest header limit NewParser accepts; smaller
	// values are raised to it so a start line can always be recognised.
	MinMaxHeaderBytes = 256
	// maxChunkLine bounds a chunk-size line including its extensions.
	maxChunkLine = 4096
)

// Message describes one HTTP message. Offsets are stream offsets.
//
// Which fields are valid when:
//   - MessageStart: Kind, Start, Proto, Method (request; for a response the
//     method of the request it answers, "" if unknown or not a standard
//     method), Status, Interim, NoRequest.
//   - HeadersDone: additionally HeaderEnd, URL, header values, ContentLength,
//     Chunked, CloseDelimited, KeepAlive, ExpectContinue. The handler may
//     set WantBody here.
//   - MessageEnd: additionally End, BodyLen, BodyWire, Hole, Incomplete,
//     HeaderTooLarge.
type Message struct {
	Start     int64 // offset of the message's first byte
	HeaderEnd int64 // offset just past the blank line ending the headers; 0 if never reached
	End       int64 // offset just past the message's last byte (set at MessageEnd)

	// Request side.
	// Method: a request's method; for a final response the method of the
	// request it answers ("" for interim responses, for NoRequest and for
	// non-standard methods).
	Method    string
	URL       string // request target as sent, cut to MaxURLLen
	Host      string
	Referer   string
	UserAgent string
	Accept    string
	// SecFetchDest and SecFetchMode are the Fetch Metadata headers
	// ("document", "image", ...; "navigate", "no-cors", ...), which
	// browsers send to secure origins only.
	SecFetchDest string
	SecFetchMode string

	// Response side.
	Status          int
	ContentType     string
	ContentEncoding string
	Location        string // a redirect's target as sent, cut to MaxURLLen

	// Both.
	Proto string // "HTTP/1.0", "HTTP/1.1" ("" if the start line was cut by the header limit)
	// ContentLength is the Content-Length header value, -1 if absent or invalid.
	ContentLength int64
	// BodyLen is the body length: payload bytes for chunked bodies, else
	// BodyWire. Bytes lost in holes are included.
	BodyLen int64
	// BodyWire is the body's length on the wire, End - HeaderEnd (chunk
	// framing and trailers included).
	BodyWire int64
	// Hole counts bytes within [Start, End) that were never captured.
	Hole int64

	// The kind and the flags last, together, so that they take no padding
	// (a parser holds its message while inside it).
	Kind Kind
	// ExpectContinue (request): "Expect: 100-continue"; the client may
	// wait for an interim 100 response before sending the body.
	ExpectContinue bool
	// Interim (response): a 1xx response other than 101; the final
	// response follows.
	Interim bool
	// NoRequest (response): a final response for which no request method
	// was pushed; it was framed as if answering GET.
	NoRequest bool
	// KeepAlive: another HTTP message may follow this one on the connection,
	// per version, Connection header and framing.
	KeepAlive      bool
	Chunked        bool // Transfer-Encoding: chunked
	CloseDelimited bool // response body ends when the server closes
	// HeaderTooLarge: the header section exceeded the parser's limit; the
	// message ends where the limit was hit (Incomplete is set too).
	HeaderTooLarge bool
	Truncated      bool // some extracted value was cut to its limit
	// Incomplete: the message did not end by its own framing: it was cut by
	// a gap, Close, a framing error or the header limit. End is then the
	// offset just past the last byte attributed to it.
	Incomplete bool

	// WantBody is set by a Handler that is also a BodyReceiver, in
	// HeadersDone, to receive this message's body.
	WantBody bool
}

// Handler receives a Parser's events. Per message the order is always
// MessageStart, at most one HeadersDone, exactly one MessageEnd; messages
// never overlap. Desync comes after the MessageEnd of a message it cuts.
//
// The *Message belongs to the parser and is reused for the next message:
// copy what you need before returning from MessageEnd (copying the struct
// or keeping its strings is safe; strings are never modified).
type Handler interface {
	// MessageStart: a valid start line was seen. It is called when the
	// start line is complete, which may be in a later Feed than m.Start.
	MessageStart(m *Message)
	// HeadersDone: the header section is complete (m.HeaderEnd set).
	HeadersDone(m *Message)
	// MessageEnd: the message is over (m.End set).
	MessageEnd(m *Message)
	// Desync: the parser lost sync at off (garbage, gap, framing error,
	// header limit) and skips bytes until a plausible message start.
	Desync(off int64, reason string)
}
