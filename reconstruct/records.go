package reconstruct

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
)

// All times are int64 nanoseconds since the Unix epoch (capture clock); all
// durations are int64 nanoseconds. Zero means "not observed".

// Flag bits describe what a record's numbers rest on.
type Flags uint32

const (
	// FlagIncomplete: the record was still open at end of input or eviction.
	FlagIncomplete Flags = 1 << iota
	// FlagMidStream: capture started after the handshake; Tconn unknown.
	FlagMidStream
	// FlagRTTEstimated: no handshake RTT; the client RTT came from data/ACK pairs or is zero.
	FlagRTTEstimated
	// FlagHole: bytes of this transaction were never captured.
	FlagHole
	// FlagNoRequest: a response with no request seen.
	FlagNoRequest
	// FlagNoResponse: a request with no response seen.
	FlagNoResponse
	// FlagTruncatedPayload: snap length cut payload; timed from sequence numbers only.
	FlagTruncatedPayload
	// FlagEvicted: the connection was evicted from a full table.
	FlagEvicted
	// FlagReset: the connection ended with RST.
	FlagReset
	// FlagNoAck: the client's ACK of the last response byte was not seen.
	FlagNoAck
	// FlagHeaderTooLarge: headers exceeded the parser's limit.
	FlagHeaderTooLarge
	// FlagParseError: the HTTP parser lost sync; parsing resumed at a later boundary.
	FlagParseError
	// FlagPreconnected: the first request came long after the handshake (a
	// browser's spare connection), so it is timed like a reused connection.
	FlagPreconnected
	// FlagSpuriousRetrans: the server resent response bytes the client
	// already had (its ACK was lost or late, shown by a D-SACK, the
	// timestamp echo or the ACK's timing); they do not extend the response.
	FlagSpuriousRetrans
	// FlagUpstreamLoss: the request's first copy was lost before the
	// capture point (a step in the client's IPv4 IDs) and the capture saw
	// its retransmission; the client's wait, estimated from its
	// retransmission timer, is part of Trequest.
	FlagUpstreamLoss
	// FlagAfterLoad (set by the pageview stage): fetched after its page's
	// load event (an undeclared favicon, a beacon, polling); the transaction
	// belongs to the pageview but not to its Total.
	FlagAfterLoad
	// FlagTLS: the connection speaks TLS. Without its keys its
	// transactions are the turns of its application-data records (the
	// request's URL, method and status unknown, the host from SNI); with
	// them (Config.KeyLog) they are decrypted and parsed.
	FlagTLS
	// FlagHTTP2: the connection negotiated HTTP/2 (ALPN h2; under TLS
	// 1.3, which hides the choice, the client's SETTINGS ACK says so). Its
	// streams interleave on one connection, so without keys its
	// transactions are turns, flagged FlagTurnEstimate. On a transaction:
	// an HTTP/2 stream of a decrypted connection, or such a turn.
	FlagHTTP2
	// FlagEarlyData: the request went as TLS 1.3 0-RTT early data, with
	// the ClientHello, so it did not wait for the handshake (its Ttls is
	// 0). On a connection: the client sent early data.
	FlagEarlyData
	// FlagContinued: the server answered the request's head with an
	// interim 100 Continue, and the request ran on to the end of its body
	// before the final response. Without keys the interim is told by the
	// length of its record (25 bytes of plaintext).
	FlagContinued
	// FlagTurnsAmbiguous (without keys): the client sent on before it had
	// the whole answer (pipelined requests, or a body still going as the
	// server answered), so where one exchange ends and the next begins is
	// a reading of the records' turns, not known.
	FlagTurnsAmbiguous
	// FlagTurnEstimate (keyless HTTP/2): the transaction is a turn of the
	// connection, not one stream: the requests the client sent while the
	// connection was idle, the streams it asked for before it had their
	// answers, and the server's records up to its next such turn. Its
	// start and end are estimates of a busy period; the number of
	// streams in it is unknown.
	FlagTurnEstimate
	// FlagCaptureDrops (set by the pipeline, live capture only): the
	// record's time span overlaps a period in which the kernel dropped
	// packets of the capture (its buffer was full), so packets of it may
	// be missing and its times and counts may be off.
	FlagCaptureDrops
)

var flagNames = []string{"incomplete", "mid_stream", "rtt_estimated", "hole", "no_request",
	"no_response", "truncated_payload", "evicted", "reset", "no_ack", "header_too_large", "parse_error",
	"preconnected", "spurious_retrans", "upstream_loss", "after_load", "tls", "http2", "early_data",
	"continued", "turns_ambiguous", "turn_estimate", "capture_drops"}

// Names lists the set flags by name.
func (f Flags) Names() []string {
	var out []string
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}

// Join is the set flags' names separated by sep ("" for none), as a CSV
// cell or a log line shows them; it builds no list of names.
func (f Flags) Join(sep string) string {
	if f == 0 {
		return ""
	}
	var b strings.Builder
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteString(sep)
			}
			b.WriteString(n)
		}
	}
	return b.String()
}

// String is the flags' names, comma-separated.
func (f Flags) String() string { return f.Join(",") }

// MarshalJSON writes the flags as a list of names: records carry the bits,
// and names exist only where they are shown or exported. The names need no
// escaping, so the list is written directly.
func (f Flags) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 64)
	b = append(b, '[')
	for i, n := range flagNames {
		if f&(1<<i) != 0 {
			if len(b) > 1 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, n...)
			b = append(b, '"')
		}
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads a list of names; an unknown name is an error.
func (f *Flags) UnmarshalJSON(b []byte) error {
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("flags: %w", err)
	}
	*f = 0
	for _, n := range names {
		i := 0
		for i < len(flagNames) && flagNames[i] != n {
			i++
		}
		if i == len(flagNames) {
			return fmt.Errorf("flags: unknown flag %q", n)
		}
		*f |= 1 << i
	}
	return nil
}

// Connection is one TCP connection as seen at the capture point.
type Connection struct {
	ID         string     `json:"id"` // stable: derived from tuple and first packet time
	Interface  int        `json:"interface"`
	Client     netip.Addr `json:"client"`
	ClientPort uint16     `json:"client_port"`
	Server     netip.Addr `json:"server"`
	ServerPort uint16     `json:"server_port"`

	SYNTimes    []int64 `json:"syn_times,omitempty"`    // every SYN with the connection's ISN
	SYNACKTimes []int64 `json:"synack_times,omitempty"` // every SYN/ACK
	Established int64   `json:"established,omitempty"`  // client's handshake ACK
	FirstSeen   int64   `json:"first_seen"`
	LastSeen    int64   `json:"last_seen"`
	Closed      int64   `json:"closed,omitempty"` // FIN exchange complete or RST

	// SYNLosses counts client SYN retransmissions with no SYN/ACK in between
	// (the SYN was dropped by the server or lost before the capture point).
	SYNLosses int `json:"syn_losses"`
	// SYNACKLosses counts client SYN retransmissions after a SYN/ACK (the
	// SYN/ACK never reached the client) plus server SYN/ACK retransmissions.
	SYNACKLosses int `json:"synack_losses"`
	// SYNLossGap / SYNACKLossGap: total client time lost to each kind of loss.
	SYNLossGap    int64 `json:"syn_loss_gap_ns"`
	SYNACKLossGap int64 `json:"synack_loss_gap_ns"`

	RTTClient int64 `json:"rtt_client_ns"` // capture point <-> client
	RTTServer int64 `json:"rtt_server_ns"` // capture point <-> server
	// Tconn is the client-perceived connect time (curl's time_connect).
	Tconn int64 `json:"tconn_ns"`
	// TLS, when the client's first bytes were a TLS ClientHello: the
	// version the server chose, the server name the client asked for
	// (SNI), the protocol ALPN chose (visible up to TLS 1.2; under TLS 1.3
	// only when the client offered one protocol), and Ttls, connected ->
	// the client's Finished.
	TLSVersion uint16 `json:"tls_version,omitempty"`
	SNI        string `json:"sni,omitempty"`
	ALPN       string `json:"alpn,omitempty"`
	Ttls       int64  `json:"ttls_ns,omitempty"`

	BytesClient  int64 `json:"bytes_client"` // payload bytes client -> server
	BytesServer  int64 `json:"bytes_server"`
	RetransBytes int64 `json:"retrans_bytes"`
	Transactions int   `json:"transactions"`
	MSSClient    int   `json:"mss_client,omitempty"`
	MSSServer    int   `json:"mss_server,omitempty"`
	// Class is the client's class, set by the pageview stage.
	Class string `json:"class,omitempty"`
	Flags Flags  `json:"flags,omitempty"`
}

// Transaction is one HTTP request/response exchange.
type Transaction struct {
	ID           string     `json:"id"` // stable: connection id + index
	ConnectionID string     `json:"connection_id"`
	Index        int        `json:"index"` // 0-based position on the connection
	Interface    int        `json:"interface"`
	Client       netip.Addr `json:"client"`
	ClientPort   uint16     `json:"client_port"`
	BodyCut      bool       `json:"-"` // in ClientPort's padding; see Body
	Server       netip.Addr `json:"server"`
	ServerPort   uint16     `json:"server_port"`
	Flags        Flags      `json:"flags,omitempty"` // in ServerPort's padding

	// Capture times. RequestFirst is the request's first byte, or any of
	// its bytes that overtook the first (reordering before the capture).
	RequestFirst  int64 `json:"request_first"`
	RequestLast   int64 `json:"request_last"`
	ResponseFirst int64 `json:"response_first"`
	ResponseLast  int64 `json:"response_last"` // last transmission of the last byte
	ResponseAcked int64 `json:"response_acked,omitempty"`
	// RequestAcked: the server's first ACK covering the whole request, when
	// its TCP took the request in. A connection the server left half-open
	// because its accept queue was full is acknowledged only once accepted,
	// so the gap from RequestLast is time in the server's listen queue.
	RequestAcked int64 `json:"request_acked,omitempty"`

	// Client-perceived times. Start is when the client began this transaction
	// (its connection's first SYN for the first transaction on a connection,
	// else the request's first byte), End when the last response byte reached it.
	Start     int64 `json:"start"`
	End       int64 `json:"end"`
	Tconn     int64 `json:"tconn_ns"`     // 0 on a reused connection
	Ttls      int64 `json:"ttls_ns"`      // connected -> the client's TLS Finished sent (0 without TLS, or reused)
	Trequest  int64 `json:"trequest_ns"`  // handshakes done (or request start) -> request's last byte sent
	Tserver   int64 `json:"tserver_ns"`   // request's last byte sent -> response's first byte received
	Ttransfer int64 `json:"ttransfer_ns"` // first -> last response byte received
	Total     int64 `json:"total_ns"`     // = Tconn + Ttls + Trequest + Tserver + Ttransfer
	RTTClient int64 `json:"rtt_client_ns"`

	RetransBytes  int64  `json:"retrans_bytes"`
	RequestBytes  int64  `json:"request_bytes"`  // headers + body on the wire
	ResponseBytes int64  `json:"response_bytes"` // headers + body on the wire
	BodyBytes     int64  `json:"body_bytes"`
	Method        string `json:"method,omitempty"`
	Host          string `json:"host,omitempty"`
	URL           string `json:"url,omitempty"`
	Status        int    `json:"status,omitempty"`
	ContentType   string `json:"content_type,omitempty"`
	Referer       string `json:"referer,omitempty"`
	UserAgent     string `json:"user_agent,omitempty"`
	Accept        string `json:"accept,omitempty"`
	HoleBytes     int64  `json:"hole_bytes,omitempty"`

	// What the pageview stage reads and nothing stores: the request's Fetch
	// Metadata destination (navigation or subresource), the response's
	// Location and Content-Encoding, and the body of an HTML or CSS
	// response as it was on the wire (content coding not undone, chunk
	// framing removed), up to Config.MaxBodyBytes. BodyCut (above, where
	// it fills a port's padding): bytes of it are missing (limit, holes).
	SecFetchDest    string `json:"-"`
	Location        string `json:"-"`
	ContentEncoding string `json:"-"`
	Body            []byte `json:"-"`

	// PageviewID, Class and Priority are set by the pageview stage; a
	// transaction that belongs to no pageview keeps an empty PageviewID.
	// Priority is the class's, for consumers that rank classes (the
	// per-class summary); it is configuration, not a measurement, so record
	// files leave it out as they always have.
	PageviewID string `json:"pageview_id,omitempty"`
	Class      string `json:"class,omitempty"`
	Priority   string `json:"-"`

	// The record stays within 512 bytes (TestTransactionSize): past that
	// it takes a larger size class and the garbage collector scans it as a
	// large object, which cost the pageview stage a sixth of its CPU time.
}

// CheckTiming reports the first timing rule of the record contract that a
// record (kind and id name it in the message) breaks, or nil: every
// component >= 0, the components add up to total, total == end - start (so
// end >= start). Transactions and pageviews share it; their components
// differ, so names says what each of comps is.
func CheckTiming(kind, id string, start, end, total int64, names []string, comps []int64) error {
	var sum int64
	for i, v := range comps {
		sum += v
		if v < 0 {
			return fmt.Errorf("%s %s: negative component %s %d (of %v = %v)", kind, id, names[i], v, names, comps)
		}
	}
	switch {
	case sum != total:
		return fmt.Errorf("%s %s: components %v (%v) do not add up to total %d", kind, id, comps, names, total)
	case end-start != total || end < start:
		return fmt.Errorf("%s %s: end %d - start %d != total %d", kind, id, end, start, total)
	}
	return nil
}
