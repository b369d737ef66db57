// Package reconstruct rebuilds TCP connections and HTTP/1.x transactions from
// decoded packets and times them as the client perceived them, from capture
// times taken at the server's side.
//
// # Tracker
//
// A Tracker takes packets in capture order and hands finished records to a
// Sink: a Connection when a connection ends (closed, reset, idle, evicted or
// flushed), a Transaction as soon as its response is complete at the
// client. It is not safe for concurrent use: one goroutine feeds it.
//
//	tr := reconstruct.NewTracker(reconstruct.Config{}, sink)
//	err := tr.ReadFrom(src, nil) // a capture.Source; Flush is called at the end
//
// or, packet by packet:
//
//	tr.Packet(&p)
//	...
//	tr.Flush() // emit what is still open
//
// The Sink owns every record it is given. Config bounds memory (connections,
// buffered bytes, pending requests, kept bodies); whatever a bound or a lost
// packet costs is counted in Stats and flagged on the record, never dropped
// silently.
//
// # Timing
//
// A Transaction's Total is Tconn + Trequest + Tserver + Ttransfer, each a
// phase at the client estimated from capture times and the client's round
// trip; losses before and after the capture point are recognised from
// retransmissions, IP IDs and SACK blocks and their cost attributed (see
// Flags). HandshakeWaits splits a connection's handshake into SYN and
// SYN/ACK losses. The definitions, estimates and flags are documented in
// docs/timing.md in the repository; how transactions group into pageviews
// is in docs/pageviews.md.
//
// The HTTP/1.x parsing itself is in the http1 subpackage.
package reconstruct
