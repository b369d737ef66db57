// Package tlswire parses the TLS record layer and the cleartext handshake
// passively, from the in-order bytes of one direction of a TCP connection
// as a monitor captured them, to tell TLS by its content on any port, to
// read what the handshake says in the clear, and to time the protected
// records that carry application data.
//
// # What it does
//
// A Stream frames one direction into records from their 5-byte headers and
// reports each record (content type, version, length, stream offset, and
// the times of the Feed calls that carried its first and last bytes). From
// cleartext handshake records it reassembles handshake messages, which may
// span records or share one, and parses the ClientHello and ServerHello
// (versions, SNI, ALPN, cipher suites, session id, resumption and 0-RTT
// offers, key share groups, HelloRetryRequest). Other handshake messages
// are reported by type and length only; their bodies are counted, not
// buffered. Cleartext alerts are reported with level and description.
//
// A Conn pairs the two directions of a connection: the version the
// server's ServerHello selects tells the client's Stream how to read a
// ChangeCipherSpec. In TLS 1.2 and earlier a ChangeCipherSpec makes the
// handshake and alert records after it in its direction protected, so they
// are reported as encrypted records and not parsed. In TLS 1.3 a
// ChangeCipherSpec is a compatibility dummy (a client may send one before a
// cleartext second ClientHello) and every protected record, handshake and
// alerts included, travels as application data: the first application-data
// records of each direction of a TLS 1.3 connection carry its encrypted
// handshake (the server's EncryptedExtensions through Finished and session
// tickets, the client's Finished), which the caller must tell from
// requests and responses by their order and timing.
//
// LooksLikeClientHello sniffs a connection's first client bytes.
//
// # Losses
//
// Data shorter than its wire length (a capture snap length) and Gap (bytes
// never captured) keep the framing as long as the missing bytes lie inside
// a record whose header was seen: the record is reported with its length
// and Truncated set, and its content is not parsed (handshake messages
// wholly captured before the cut still are). Missing bytes that cover a
// record header lose the framing: the Stream reports KindLost, counts the
// bytes it cannot frame as skipped, and hunts for a plausible header,
// resuming (KindResync) only once the header after it also checks out, so
// that it never misframes silently. After a loss the handshake layer of
// that direction stays off. Garbage input (an invalid content type or
// version, a length over 2^14+2048) is handled the same way.
//
// # Bounds
//
// A Stream buffers at most one hello message of up to MaxHelloLen bytes,
// and only while it spans Feed calls or records; larger hellos are
// reported as truncated. Events returned by Feed and Gap are reused by the
// next call.
//
// # What it does not do
//
// It decrypts nothing, holds no keys, does not validate the handshake
// (signatures, transcript, certificates), does not parse SSL 2.0 hellos,
// DTLS or QUIC, and does not reorder or deduplicate TCP segments: the
// caller feeds each direction in sequence order and reports holes with Gap.
// It is not safe for concurrent use.
package tlswire
