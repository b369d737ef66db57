package reconstruct

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net/netip"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct/http1"
	"github.com/rtmon/rtmon/reconstruct/tlsdecrypt"
)

// Config bounds and steers the tracker. Zero values take the defaults below.
type Config struct {
	// ServerPorts and ServerNets identify the server side of connections whose
	// handshake was not captured. Without them the payload (a request line or a
	// status line) decides, then the lower well-known port.
	ServerPorts []uint16
	ServerNets  []netip.Prefix
	// MaxConnections bounds the connection table; the least recently active
	// connection is evicted (and counted) when a new one would exceed it.
	MaxConnections int
	// IdleTimeout ends a connection with no packets for this long (packet time).
	IdleTimeout time.Duration
	// ClosedLinger keeps a closed connection's entry so late ACKs and
	// retransmitted FINs are not mistaken for a new mid-stream connection.
	ClosedLinger time.Duration
	// MaxHeaderBytes bounds one HTTP message's header block.
	MaxHeaderBytes int
	// MaxHeaderBudget bounds the header bytes held by all connections
	// whose header section spans segments (default 32 MiB: 512 such
	// connections at the 64 KiB limit). A section that meets it is cut
	// (FlagHeaderTooLarge, counted in Stats.HeadersCut): 3,000 connections
	// each stopping short of the limit held 375 MB.
	MaxHeaderBudget int
	// MaxBufferedBytes bounds out-of-order bytes held per direction; past it the
	// missing range is declared a hole.
	MaxBufferedBytes int
	// MaxPendingRequests bounds requests waiting for responses (pipelining),
	// and complete responses waiting for the client's ACK.
	MaxPendingRequests int
	// MaxBodyBytes bounds the body kept of one HTML or CSS response, which
	// the pageview stage reads for the objects a page references;
	// MaxBodyBudget bounds all such bodies in flight together. A body past
	// either is cut (Transaction.BodyCut). Negative disables body capture.
	MaxBodyBytes  int
	MaxBodyBudget int
	// KeepURLSecrets stores URLs and Referers as captured. By default the
	// credentials in them (RedactURL: ?token=, password=, signatures,
	// session ids, userinfo passwords) are replaced by Redacted before any
	// record leaves the tracker: captures of logins, password resets and
	// rtmon's own ?token= link would otherwise be stored and searchable.
	KeepURLSecrets bool
	// Redaction adds to what is redacted: more parameter names, or whole
	// query strings. KeepURLSecrets turns all of it off. The pageview stage
	// must be given the same (pageview.Config.Redaction) to match
	// Referers and HTML references through it.
	Redaction URLRedaction
	// MaxMemory bounds the memory the tracker's state is counted at
	// (0: unbounded): ConnectionMemory per open connection, the
	// out-of-order segments buffered, the header and body buffers. Past
	// it the least recently active connections are evicted first (their
	// records flagged evicted and incomplete, counted in Stats.Evicted and
	// MemoryEvictions). rtmon sets it from --max-memory.
	MaxMemory int64
	// IDKey, if set, keys connection ids (HMAC-SHA256) instead of an
	// unkeyed hash of the endpoints: with client addresses anonymized, an
	// unkeyed id would let a search over addresses recover them. Ids stay
	// stable across runs with the same key. Transaction and pageview ids
	// derive from connection ids.
	IDKey []byte
	// KeyLog, if set, decrypts the TLS connections whose secrets it holds
	// (see tlsplain.go): their HTTP is parsed like cleartext. Without it
	// HTTPS is timed keyless, and nothing else changes.
	KeyLog *tlsdecrypt.KeyLog
	// KeyLogWait is how long a connection whose key line is not in
	// KeyLog yet holds its records for it (a live capture, whose key log
	// is written as the handshakes happen and read every so often); 0
	// gives it up at once, as for a key log read whole.
	KeyLogWait time.Duration
}

// Defaults for Config's zero values.
const (
	DefaultMaxConnections     = 1 << 20
	DefaultIdleTimeout        = 5 * time.Minute
	DefaultClosedLinger       = 30 * time.Second
	DefaultMaxHeaderBytes     = 64 << 10
	DefaultMaxBufferedBytes   = 1 << 20
	DefaultMaxPendingRequests = 64
	DefaultMaxHeaderBudget    = 32 << 20
	DefaultMaxBodyBytes       = 256 << 10
	DefaultMaxBodyBudget      = 64 << 20
)

func (c *Config) withDefaults() Config {
	out := *c
	orDefault(&out.MaxConnections, DefaultMaxConnections)
	orDefault(&out.IdleTimeout, DefaultIdleTimeout)
	orDefault(&out.ClosedLinger, DefaultClosedLinger)
	orDefault(&out.MaxHeaderBytes, DefaultMaxHeaderBytes)
	orDefault(&out.MaxBufferedBytes, DefaultMaxBufferedBytes)
	orDefault(&out.MaxPendingRequests, DefaultMaxPendingRequests)
	orDefault(&out.MaxHeaderBudget, DefaultMaxHeaderBudget)
	// Negative body bounds disable body capture, so only zero takes the default.
	if out.MaxBodyBytes == 0 {
		out.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if out.MaxBodyBudget == 0 {
		out.MaxBodyBudget = DefaultMaxBodyBudget
	}
	return out
}

// orDefault sets a bound left zero (or negative) to its default.
func orDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Sink receives finished records. The tracker hands over ownership: it never
// touches a record again after passing it on.
type Sink interface {
	Connection(*Connection)
	Transaction(*Transaction)
}

// Stats counts what the tracker did; every record that is not emitted normally
// shows up here.
type Stats struct {
	Packets            uint64 `json:"packets"`
	Connections        uint64 `json:"connections"`
	MidStream          uint64 `json:"mid_stream"`
	Closed             uint64 `json:"closed"`
	Expired            uint64 `json:"expired"`
	Evicted            uint64 `json:"evicted"`
	Transactions       uint64 `json:"transactions"`
	RetransSegments    uint64 `json:"retrans_segments"`
	OutOfOrderSegments uint64 `json:"out_of_order_segments"`
	Holes              uint64 `json:"holes"`
	HoleBytes          uint64 `json:"hole_bytes"`
	ParseDesyncs       uint64 `json:"parse_desyncs"`
	// TLSConnections counts connections that began with a TLS
	// ClientHello (timed keyless), HTTP2Connections those of them that
	// negotiated or may have negotiated HTTP/2 (no transactions), and
	// TLSFramingLost those whose record framing a hole broke.
	TLSConnections   uint64 `json:"tls_connections"`
	HTTP2Connections uint64 `json:"http2_connections"`
	TLSFramingLost   uint64 `json:"tls_framing_lost"`
	// TLSEarlyData counts TLS 1.3 connections whose client sent a request
	// as 0-RTT early data, TLSEarlyRejected those of them whose server
	// refused it (the client sent it again after the handshake).
	TLSEarlyData     uint64 `json:"tls_early_data"`
	TLSEarlyRejected uint64 `json:"tls_early_rejected"`
	// With a Config.KeyLog only (zero, and left out, without one):
	// TLSDecrypted counts connections whose decryption began (their key
	// was in the log), TLSKeyless TLS connections that ended timed keyless
	// (no key, or decryption given up), TLSNoKey those whose client
	// random the log lacked, and TLSDecryptErrors those with a key that
	// could not be decrypted (unsupported version or suite) or whose
	// decryption failed partway (a record that did not authenticate or
	// was not wholly captured, lost framing). TLSKeyLate counts the
	// decrypted ones whose key line came after their ServerHello
	// (Config.KeyLogWait).
	TLSDecrypted     uint64 `json:"tls_decrypted,omitempty"`
	TLSKeyLate       uint64 `json:"tls_key_late,omitempty"`
	TLSKeyless       uint64 `json:"tls_keyless,omitempty"`
	TLSNoKey         uint64 `json:"tls_no_key,omitempty"`
	TLSDecryptErrors uint64 `json:"tls_decrypt_errors,omitempty"`
	OutOfWindow      uint64 `json:"out_of_window"`
	// StrayResets counts resets whose sequence number is not their
	// connection's (another incarnation of the four-tuple), ignored.
	StrayResets      uint64 `json:"stray_resets"`
	BufferOverflows  uint64 `json:"buffer_overflows"`
	PendingOverflows uint64 `json:"pending_overflows"`
	// AwaitingOverflows counts complete responses given up waiting for
	// the client's ACK (emitted flagged no_ack) because a connection held
	// MaxPendingRequests of them.
	AwaitingOverflows uint64 `json:"awaiting_overflows"`
	// DuplicateSYNs counts client SYNs seen again within a millisecond
	// (not losses); HandshakeTimesDropped the SYN and SYN/ACK times past
	// a connection's bound of 16.
	DuplicateSYNs uint64 `json:"duplicate_syns"`
	// HeadersCut counts header sections cut because all connections'
	// header buffers together reached MaxHeaderBudget.
	HeadersCut uint64 `json:"headers_cut"`
	// HeaderBytesHeld is what the header buffers hold now.
	HeaderBytesHeld       int    `json:"header_bytes_held"`
	HandshakeTimesDropped uint64 `json:"handshake_times_dropped"`
	// BodiesCut counts HTML/CSS bodies cut by MaxBodyBytes or MaxBodyBudget.
	BodiesCut       uint64 `json:"bodies_cut"`
	OpenConnections int    `json:"open_connections"`
	// MemoryInUse is the state counted against MaxMemory now;
	// MemoryEvictions the connections evicted to stay within it.
	MemoryInUse     int64  `json:"memory_in_use"`
	MemoryEvictions uint64 `json:"memory_evictions"`
}

// What an open connection is counted at against MaxMemory besides its
// buffers, by the state it holds: the heap measured with
// bench.ConnMemory (50k open: 362 B with a handshake only, 650 B idle
// keep-alive, 946 B with a request pending, 882 B mid-response),
// rounded up. A flat figure would
// shed a SYN flood twice as early as its memory requires and let
// responses in flight overrun the bound by half.
const (
	// ConnectionMemory is the least an open connection is counted at:
	// the connection itself (320 B, its handshake times within it), its table and
	// index entries.
	ConnectionMemory = 384
	// flowMemory: a connection that carried data (its flowState).
	flowMemory = 288
	// parserMemory: an HTTP/1 parser held inside a message (its header
	// scratch is held only inside a header section, and its buffer is
	// counted by the header budget). A plain HTTP connection's response
	// parser is parked in a txState instead while it waits inside a
	// body or for a pending request's response (releaseIdleParsers).
	parserMemory = 208
	// queueMemory: transactions waiting in line, more than one (txQueues,
	// 48 B, and its arrays, a slot a transaction); a lone one takes
	// flowState.one.
	queueMemory = 64
	// txMemory: a transaction in flight (request pending, response
	// arriving, or waiting for the client's ACK): its txState (208 B,
	// with room for a parked response parser), the URL and Referer it
	// keeps (the values clients repeat are interned, shared by their
	// transactions), and a request's sentNotes (64 B), held only until
	// its response starts (on TLS until it is emitted).
	txMemory = 320
)

// flowKey identifies a connection independently of direction: the endpoint
// that sorts first is always a. Addresses are kept as 16 bytes (IPv4 mapped)
// rather than netip.Addr, which would add a zone pointer to every table slot.
type flowKey struct {
	a, b   [16]byte
	ap, bp uint16
}

func makeKey(p *capture.Packet) (k flowKey, fromA bool) {
	return keyOf(p.SrcIP, p.DstIP, p.SrcPort, p.DstPort)
}

// keyOf orders the endpoints; fromA reports whether src sorts first.
func keyOf(src, dst netip.Addr, sp, dp uint16) (k flowKey, fromA bool) {
	s, d := src.As16(), dst.As16()
	c := bytes.Compare(s[:], d[:])
	if c < 0 || (c == 0 && sp <= dp) {
		return flowKey{s, d, sp, dp}, true
	}
	return flowKey{d, s, dp, sp}, false
}

// Tracker turns packets into connections and transactions. It is not safe for
// concurrent use: one goroutine feeds it, in capture-time order.
type Tracker struct {
	cfg   Config
	sink  Sink
	conns connTable
	// byClient1 and byClient index the open connections by client
	// address (InFlight): clients with one, and with more (see indexClient).
	byClient1 clientTable
	byClient  map[netip.Addr][]*conn
	// lru is an intrusive list ordered by last activity: expiry and eviction
	// take from its head without scanning the table.
	lru       conn
	now       int64
	nextSweep int64
	stats     Stats
	// instant counts connections opened at one capture instant with the
	// same endpoints and first sequence number, so even those get distinct
	// ids (a suffix); it only ever holds the current instant's entries.
	instantTS int64
	instant   map[instantKey]uint8
	// bodyBytes is what the bodies of responses in flight hold (see
	// Config.MaxBodyBudget).
	bodyBytes int
	// tlsBytes is what TLS sessions hold: their state and the hellos
	// they buffer (see conn.tlsAccount).
	tlsBytes int
	// keyWaiters are the connections that closed while their records
	// waited for a key line (tlskeywait.go): each sweep asks again.
	keyWaiters []*conn
	// rtts is the clients' per-destination RTT memory (see rttCache).
	rtts rttCache
	// spareFlow is a flowState a connection handed back unused, for the
	// next that needs one (see dropPristineFlow).
	spareFlow *flowState
	// headers bounds the header bytes all parsers hold (MaxHeaderBudget).
	headers http1.HeaderBudget
	// reorderBytes is what all connections' out-of-order buffers hold.
	reorderBytes int
	// connBytes is what the open connections are counted at by their
	// states (see conn.footprint), as of each one's latest packet.
	connBytes int64
}

type instantKey struct {
	key flowKey
	seq uint32
}

// NewTracker returns a tracker that emits records to sink.
func NewTracker(cfg Config, sink Sink) *Tracker {
	t := &Tracker{cfg: cfg.withDefaults(), sink: sink, conns: newConnTable(),
		byClient: make(map[netip.Addr][]*conn), byClient1: newClientTable()}
	t.rtts.limit = t.cfg.MaxConnections
	t.headers.Max = t.cfg.MaxHeaderBudget
	t.lru.prev, t.lru.next = &t.lru, &t.lru
	return t
}

// Stats returns the counters so far.
func (t *Tracker) Stats() Stats {
	s := t.stats
	s.OpenConnections = t.conns.len()
	s.HeadersCut, s.HeaderBytesHeld = t.headers.Refused, t.headers.Held()
	s.MemoryInUse = t.memoryInUse()
	return s
}

// memoryInUse is the tracker's state as counted against MaxMemory.
func (t *Tracker) memoryInUse() int64 {
	return t.connBytes + int64(t.reorderBytes) + int64(t.headers.Held()) + int64(t.bodyBytes) + int64(t.tlsBytes)
}

// shed evicts the least recently active connections, never keep (the one
// the current packet belongs to), while the state is counted over
// MaxMemory.
func (t *Tracker) shed(keep *conn) {
	for t.cfg.MaxMemory > 0 && t.memoryInUse() > t.cfg.MaxMemory {
		victim := t.lru.next
		if victim == &t.lru || victim == keep {
			return
		}
		t.stats.Evicted++
		t.stats.MemoryEvictions++
		t.finish(victim, FlagEvicted|FlagIncomplete)
	}
}

// Packet processes one TCP segment. The packet's buffers are not retained.
func (t *Tracker) Packet(p *capture.Packet) {
	t.stats.Packets++
	t.Advance(p.Timestamp)
	key, fromA := makeKey(p)
	c := t.conns.get(key)
	if c != nil && c.startsNewConnection(p) {
		t.finish(c, 0)
		c = nil
	}
	if c == nil {
		if p.Flags&capture.FlagRST != 0 {
			return // a reset for a connection we never saw tells nothing
		}
		c = t.open(key, p)
	}
	c.rec.LastSeen = p.Timestamp // (packet sets it too: expiry reads it)
	t.touch(c)
	fromClient := fromA == c.is(cfClientIsA)
	held := c.reorderHeld()
	c.packet(p, fromClient)
	t.reorderBytes += c.reorderHeld() - held
	t.recount(c)
	if c.is(cfDone) && !c.is(cfRecorded) {
		c.set(cfRecorded, true)
		t.emitConnection(c)
	}
	t.shed(c)
}

// Advance moves the tracker's clock to capture time now, as a packet of
// that time would, and sweeps idle connections when a second of capture
// time has passed since the last sweep. A sharded pipeline advances every
// shard's tracker to the time of every packet, so connections expire at
// the same capture times whichever shard holds them.
func (t *Tracker) Advance(now int64) {
	if now > t.now {
		t.now = now
	}
	if t.now >= t.nextSweep {
		t.resolveKeyWaits()
		t.expire()
		t.nextSweep = t.now + int64(time.Second)
	}
}

func (t *Tracker) open(key flowKey, p *capture.Packet) *conn {
	if t.conns.len() >= t.cfg.MaxConnections {
		t.stats.Evicted++
		t.finish(t.lru.next, FlagEvicted|FlagIncomplete)
	}
	c := newConn(t, p)
	if p.Timestamp != t.instantTS {
		clear(t.instant)
		t.instantTS = p.Timestamp
	}
	if t.instant == nil {
		t.instant = make(map[instantKey]uint8)
	}
	ik := instantKey{key, p.Seq}
	c.rec.twin = t.instant[ik]
	t.instant[ik] = c.rec.twin + 1
	t.conns.put(key, c)
	t.indexClient(c)
	t.stats.Connections++
	if c.rec.Flags&FlagMidStream != 0 {
		t.stats.MidStream++
	}
	c.prev, c.next = t.lru.prev, &t.lru
	t.lru.prev.next = c
	t.lru.prev = c
	return c
}

// recount brings c's share of connBytes up to its state after a packet.
// Only the connection a packet belongs to changes much, so the others'
// shares stay as of their own latest packets until they leave.
func (t *Tracker) recount(c *conn) {
	n := min(c.footprint(), math.MaxInt32) // past 2 GiB only with MaxPendingRequests in the millions
	t.connBytes += n - int64(c.counted)
	c.counted = int32(n)
}

// footprint is what c is counted at against MaxMemory besides its buffers.
func (c *conn) footprint() int64 {
	n := int64(ConnectionMemory)
	f := c.flowState
	if f == nil {
		return n
	}
	n += flowMemory
	if f.reqParser != nil {
		n += parserMemory
	}
	if f.respParser != nil {
		n += parserMemory
	}
	inflight := len(f.pending()) + len(f.awaiting())
	if f.q != nil {
		n += queueMemory
	}
	if f.resp != nil {
		inflight++
	}
	return n + int64(inflight)*txMemory
}

func (t *Tracker) touch(c *conn) {
	if t.lru.prev == c {
		return
	}
	c.prev.next, c.next.prev = c.next, c.prev
	c.prev, c.next = t.lru.prev, &t.lru
	t.lru.prev.next = c
	t.lru.prev = c
}

// expire ends connections idle past their timeout. The list is ordered by
// activity, so it stops at the first live one; a closed connection lingers
// less, so it is checked on its own clock while walking.
func (t *Tracker) expire() {
	idle := int64(t.cfg.IdleTimeout)
	linger := int64(t.cfg.ClosedLinger)
	for c := t.lru.next; c != &t.lru; {
		next := c.next
		age := t.now - c.rec.LastSeen
		switch {
		case c.is(cfDone) && age > linger:
			t.finish(c, 0)
		case age > idle:
			t.stats.Expired++
			t.finish(c, FlagIncomplete)
		case age <= linger:
			return // everything after is younger still
		}
		c = next
	}
}

// finish ends c, emitting what it still holds, and removes it from the table.
func (t *Tracker) finish(c *conn, flags Flags) {
	// Counted before end, which may deliver what is buffered: all of it
	// leaves with the connection.
	t.reorderBytes -= c.reorderHeld()
	t.connBytes -= int64(c.counted)
	c.counted = 0
	if !c.is(cfDone) {
		c.end(flags)
	}
	if !c.is(cfRecorded) {
		c.set(cfRecorded, true)
		t.emitConnection(c)
	}
	c.prev.next, c.next.prev = c.next, c.prev
	c.prev, c.next = nil, nil
	c.c2s.ooo, c.s2c.ooo = nil, nil
	t.conns.remove(c)
	t.unindexClient(c)
	if c.rec.Flags&FlagEvicted == 0 && flags&FlagIncomplete == 0 {
		t.stats.Closed++
	}
}

func (t *Tracker) emitConnection(c *conn) {
	rec := c.record()
	t.sink.Connection(&rec)
}

func (t *Tracker) emitTransaction(tx *Transaction) {
	t.stats.Transactions++
	t.bodyBytes -= len(tx.Body) // the body now belongs to the sink
	t.sink.Transaction(tx)
}

// connectionHash makes a connection's id (see conn.id), stable across
// re-ingests of the same capture: it depends only on the endpoints, the
// connection's first packet time and that packet's sequence number (which
// tells apart two SYNs with different ISNs captured in the same instant).
// With a key (Config.IDKey) it is keyed, and as long (16 hex digits).
func connectionHash(key []byte, client, server netip.AddrPort, first int64, seq uint32) uint64 {
	// The hash's input on the stack: every new connection makes an id,
	// and the hash.Hash, MarshalBinary and Sum of the plain way took four
	// allocations each time (37 B a connection on a capture of 300k open
	// ones).
	var in [2*(16+2) + 8 + 4]byte
	b, _ := client.AppendBinary(in[:0])
	b, _ = server.AppendBinary(b)
	b = binary.BigEndian.AppendUint64(b, uint64(first))
	b = binary.BigEndian.AppendUint32(b, seq)
	if key != nil {
		h := hmac.New(sha256.New, key)
		// A copy, so that in stays on the stack (Write's argument escapes).
		h.Write(append([]byte(nil), b...))
		return binary.BigEndian.Uint64(h.Sum(nil)[:8])
	}
	// FNV-1a, 64 bits (hash/fnv's New64a), unrolled so that nothing
	// escapes.
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= prime64
	}
	return h
}

// progressEvery is how many packets ReadFrom processes between calls of its
// progress hook: rare enough to cost nothing, often enough for a progress bar
// and a prompt reaction to Ctrl-C.
const progressEvery = 1 << 16

// ReadFrom feeds every packet of src to the tracker and flushes it at the end
// of input. progress, if not nil, runs every progressEvery packets; an error
// from it stops reading. The returned error is nil at a clean end of input,
// else the source's error (a truncated file, say) or progress's, after
// everything read before it was processed.
func (t *Tracker) ReadFrom(src capture.Source, progress func() error) error {
	return t.ReadFromEvery(src, progressEvery, progress)
}

// ReadFromEvery is ReadFrom with the progress hook run every n packets: live
// capture, whose dashboards want fresh counters at a few packets a second,
// asks for small n.
func (t *Tracker) ReadFromEvery(src capture.Source, n int, progress func() error) error {
	if n <= 0 {
		n = progressEvery
	}
	var p capture.Packet
	var err error
	for i := 1; ; i++ {
		if err = src.Next(&p); err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			break
		}
		t.Packet(&p)
		if progress != nil && i%n == 0 {
			if err = progress(); err != nil {
				break
			}
		}
	}
	t.Flush()
	return err
}
