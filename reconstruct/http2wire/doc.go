// Package http2wire parses HTTP/2 passively, from the in-order plaintext
// bytes of both directions of one connection as a monitor captured them,
// to time each request and response on a multiplexed connection.
//
// # What it does
//
// A Conn is fed each direction's bytes with their capture times. It checks
// the client's connection preface, frames both directions (RFC 9113),
// decodes header blocks with golang.org/x/net/http2/hpack (one decoder per
// direction, HEADERS or PUSH_PROMISE through CONTINUATION, dynamic table
// limits from SETTINGS_HEADER_TABLE_SIZE), and follows each stream: the
// request's pseudo-headers, user agent, content type and length,
// Referer, Accept and Sec-Fetch-Dest; the response's 1xx and final
// status, content type and length, Location and Content-Encoding, and
// its body when the caller asks for it (Config.WantBody); trailers;
// the times of the first byte of the first HEADERS frame, of the first
// DATA frame and of the frame that carried END_STREAM on each side; body
// bytes; priority; RST_STREAM; GOAWAY, which refuses the streams above its
// last stream id; and server push (a PUSH_PROMISE opens the promised
// stream, flagged Pushed, with the promised request as its request).
//
// Each stream is emitted once, as a KindStream event, when both sides
// ended, when it was reset or refused, when a direction it still waited
// on was lost, or at Close, flagged Incomplete unless it ended properly.
//
// # Errors and losses
//
// A bad preface, a frame over the receiver's SETTINGS_MAX_FRAME_SIZE, a
// frame that breaks the framing rules, or a header block that does not
// decode stops parsing of that direction for good with a KindError event:
// framing or HPACK state past such a point cannot be trusted. A Gap
// (bytes never captured) does the same: nothing in HTTP/2 marks frame
// boundaries to resynchronise on, and even then the HPACK dynamic table
// would be wrong for every later header block. The other direction goes
// on: responses on a connection whose client bytes were lost are still
// timed, their requests unseen (Request.Seen false).
//
// # Bounds
//
// A Conn buffers no frame: bodies are counted and header fragments are
// fed to the HPACK decoder as they arrive. The only bodies it keeps are
// those Config.WantBody asks for, each within MaxBodyLen, together within
// MaxBodyBuffered and within what Config.Reserve grants (Response.BodyCut
// and BodyLimited say when one was cut). It tracks at most
// Config.MaxStreams streams (new ones beyond are counted in
// Stats.StreamsDropped and ignored), examines at most MaxHeaders fields
// and MaxHeaderListSize bytes of a header block, retains header values of
// at most MaxValueLen bytes and at most MaxTrailers trailer fields and 8
// informational responses (Stream.Truncated says when something was cut),
// and lets a peer use an HPACK table of at most MaxHeaderTableSize bytes.
//
// # What it does not do
//
// It decrypts nothing (feed it plaintext, e.g. from a TLS decrypter),
// enforces no flow control and no stream concurrency limit, does not
// validate header semantics, does not follow an HTTP/1.1 Upgrade to h2c
// nor a connection picked up mid-stream (the preface is required), does
// not parse RFC 9218 PRIORITY_UPDATE frames or ALTSVC/ORIGIN (unknown
// frames are counted and skipped), and does not reorder TCP segments: the
// caller feeds each direction in sequence order, both in capture time
// order, and reports holes with Gap. Pushed responses are timed like
// others; whether the client used or cancelled them is only visible as
// a RST_STREAM from the client.
package http2wire
