package pageview

import (
	"net/netip"
	"time"

	"github.com/rtmon/rtmon/internal/minheap"
	"github.com/rtmon/rtmon/pageview/embeds"
	"github.com/rtmon/rtmon/reconstruct"
)

// Config steers and bounds the Grouper. Zero values take the defaults below.
// All times are packet time: the Grouper never reads the wall clock.
type Config struct {
	// Settle is how long past a transaction's End the Grouper waits for
	// transactions that started earlier but completed later (a slow
	// container) before processing it; transactions are then processed in
	// Start order.
	Settle time.Duration
	// IdleGap closes a pageview when no object starts within this long of its
	// latest End. An object starting later belongs to no pageview.
	IdleGap time.Duration
	// Window bounds attachment by time alone (no Referer, not named in the
	// page's HTML): such an object must start within Window of the
	// container's Start (and within IdleGap of the pageview's latest End).
	Window time.Duration
	// OrphanWait is how long an object that matched no open pageview waits
	// (from its Start) for a container processed later to adopt it, before it
	// goes out stand-alone. A redirect waits as long for its target.
	OrphanWait time.Duration
	// ConnWait is how long a closed pageview waits for the connection records
	// of the connections it opened (they carry the SYN loss counts).
	ConnWait time.Duration
	// InFlightWait bounds how long a pageview stays open for its client's
	// transactions still in flight (see Grouper.WatchInFlight), counted
	// from their start: Linux gives up connecting after 127 s of SYN
	// retries by default, other stacks sooner.
	InFlightWait time.Duration

	MaxHeld int // transactions held for reordering
	MaxOpen int // open pageviews
	// MaxPerClient bounds the open pageviews of one client (address +
	// User-Agent): generously, since a NAT address of one office, or a load
	// generator, loads many pages at once with one User-Agent.
	MaxPerClient int
	MaxObjects   int // transactions per pageview
	// MaxMembers bounds the transactions held in open and pending pageviews
	// altogether (they are kept for timing and HAR output until emitted).
	MaxMembers   int
	MaxOrphans   int // objects and redirects waiting for a container
	MaxPending   int // closed pageviews waiting for connection records
	MaxConnCache int // connection records remembered until their pageview claims them

	// Redaction must be the tracker's (reconstruct.Config.Redaction): the
	// Grouper redacts the URLs a page's HTML names and the Locations of
	// redirects the same way before it matches them with the records'
	// redacted URLs and Referers.
	Redaction reconstruct.URLRedaction
}

// Defaults for Config's zero values.
const (
	DefaultSettle       = 2 * time.Second
	DefaultIdleGap      = 5 * time.Second
	DefaultWindow       = 10 * time.Second
	DefaultOrphanWait   = 10 * time.Second
	DefaultConnWait     = 15 * time.Second
	DefaultInFlightWait = 130 * time.Second
	DefaultMaxHeld      = 1 << 20
	DefaultMaxOpen      = 1 << 18
	DefaultMaxPerClient = 64
	DefaultMaxObjects   = 2000
	DefaultMaxMembers   = 1 << 21
	DefaultMaxOrphans   = 1 << 17
	DefaultMaxPending   = 1 << 18
	DefaultMaxConnCache = 1 << 18
)

func (c Config) withDefaults() Config {
	orDefault(&c.Settle, DefaultSettle)
	orDefault(&c.IdleGap, DefaultIdleGap)
	orDefault(&c.Window, DefaultWindow)
	orDefault(&c.OrphanWait, DefaultOrphanWait)
	orDefault(&c.ConnWait, DefaultConnWait)
	orDefault(&c.InFlightWait, DefaultInFlightWait)
	// The limits all bound counts, each by its own default.
	limits := [...]struct {
		v *int
		d int
	}{{&c.MaxHeld, DefaultMaxHeld}, {&c.MaxOpen, DefaultMaxOpen}, {&c.MaxPerClient, DefaultMaxPerClient},
		{&c.MaxObjects, DefaultMaxObjects}, {&c.MaxMembers, DefaultMaxMembers}, {&c.MaxOrphans, DefaultMaxOrphans},
		{&c.MaxPending, DefaultMaxPending}, {&c.MaxConnCache, DefaultMaxConnCache}}
	for _, l := range limits {
		orDefault(l.v, l.d)
	}
	return c
}

// orDefault sets a zero or negative setting to its default.
func orDefault[T time.Duration | int](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// Stats counts what the Grouper did. Overflow counters say where a bound
// changed the result; no record is ever dropped.
type Stats struct {
	Transactions uint64 `json:"transactions"`
	Connections  uint64 `json:"connections"`
	Pageviews    uint64 `json:"pageviews"`
	ByReferer    uint64 `json:"by_referer"` // objects attached by Referer
	ByHTML       uint64 `json:"by_html"`    // objects without a (matching) Referer attached because the page's HTML names them
	ByWindow     uint64 `json:"by_window"`  // objects attached by time window
	Adopted      uint64 `json:"adopted"`    // objects attached to a container processed after them
	Redirects    uint64 `json:"redirects"`  // redirects attached to the page they led to
	AfterLoad    uint64 `json:"after_load"` // objects fetched after their page's load event
	StandAlone   uint64 `json:"stand_alone"`
	// PagesRead and PageReadErrors count HTML and CSS bodies read for the
	// objects they reference, and those that could not be (wholly) read:
	// cut by the capture, an unknown content coding.
	PagesRead      uint64 `json:"pages_read"`
	PageReadErrors uint64 `json:"page_read_errors"`
	// Late counts transactions processed after a transaction that started
	// later (they completed more than Settle after it): grouping may have
	// missed them.
	Late uint64 `json:"late"`
	// AwaitedInFlight counts pageviews kept open past their idle gap for
	// their client's transactions still in flight (see WatchInFlight).
	AwaitedInFlight uint64 `json:"awaited_in_flight"`
	// MissingConnections counts pageviews emitted before the records of all
	// the connections they opened arrived (SYN loss counts may be low).
	MissingConnections uint64 `json:"missing_connections"`

	HeldOverflow      uint64 `json:"held_overflow"`       // processed before settling
	OpenOverflow      uint64 `json:"open_overflow"`       // pageviews closed early (table full)
	PerClientOverflow uint64 `json:"per_client_overflow"` // pageviews closed early (client's list full)
	ObjectOverflow    uint64 `json:"object_overflow"`     // objects left stand-alone (pageview full)
	MemberOverflow    uint64 `json:"member_overflow"`     // pageviews closed early (MaxMembers)
	OrphanOverflow    uint64 `json:"orphan_overflow"`     // objects sent stand-alone at once (orphan list full)
	PendingOverflow   uint64 `json:"pending_overflow"`    // pageviews emitted before ConnWait
	ConnCacheEvicted  uint64 `json:"conn_cache_evicted"`  // connection records forgotten unclaimed

	Held    int `json:"held"`
	Open    int `json:"open"`
	Orphans int `json:"orphans"`
	Pending int `json:"pending"`
}

// Grouper is the streaming pageview stage: a reconstruct.Sink that groups
// transactions into pageviews and forwards every record, classified (Class,
// and Priority on transactions), to a Sink. Not safe for concurrent use. At end of input call the tracker's
// Flush first, then the Grouper's.
//
// Grouping rules:
//   - A client is an address plus User-Agent, so browsers behind one NAT
//     address stay apart.
//   - A navigation starts a pageview: a response whose Content-Type is HTML
//     (Accept, then the URL shape, decide without one; see IsContainer),
//     unless Sec-Fetch-Dest names a subresource or an open page of the
//     client embeds it (an iframe). A navigation answered by a redirect
//     waits for the request of its Location, whose pageview then starts at
//     the redirect.
//   - The container's HTML is read for the objects it references (package
//     embeds; gzip, deflate and br undone), and each stylesheet of the page
//     adds what it references. That set is the strongest evidence of
//     membership without a Referer, and says which objects the load event
//     waits for.
//   - An object joins, in this order: the client's open pageview whose
//     container, or one of whose objects (stylesheets refer their images),
//     its Referer names (host compared case-insensitively without a
//     default port, then path and query; a relative Referer takes the
//     object's Host; a fragment is ignored); else the newest open pageview
//     whose HTML names the object, so a client without Referer that moves
//     to the next page on its keep-alive connections feeds the new page
//     and an older page still loading keeps what only it names; else, by
//     time alone, the client's newest pageview, if the object starts within
//     Window of its container or within a second of the page's load so far
//     (up to six Windows: a load an overloaded server stretched still
//     takes the favicon and beacons of its load event). Every object must
//     start no earlier than the container (its request, for one named by
//     Referer or HTML: a spare socket may predate the page) and within
//     IdleGap of the pageview's latest End.
//   - Transactions arrive in completion order. Each is held until packet
//     time is Settle past its End, then processed in Start order. An object
//     that matches nothing waits up to OrphanWait for a container processed
//     later (a container that took longer than its objects) that it would
//     have matched; then it goes out stand-alone (empty PageviewID).
//   - A pageview idle for IdleGap closes, unless its client has a
//     transaction still in flight in the tracker that began within it
//     (WatchInFlight): an object connecting through seconds of SYN drops.
//
// A pageview ends where the browser's load event would: at the latest End
// of its container, redirects and the objects the load waits for. Objects
// the HTML names as blocking always count; undeclared ones (inserted by
// scripts) count if they started before the load was over (with a little
// slack for parser-found objects when no HTML could be read); icons,
// prefetches and lazy images count only if they ended within the load; an
// undeclared /favicon.ico never does. The rest are after-load objects
// (FlagAfterLoad): members of the pageview, outside its Total.
//
// Transactions whose place in the load is certain (container, redirects,
// objects the HTML names as blocking) are forwarded as soon as they are
// processed; the others when their pageview closes, with their verdict. A
// pageview record follows when it closes and the records of the connections
// it opened (those whose first transaction, Index 0, is in it) have
// arrived, or ConnWait has passed (Flags then include incomplete). SYN and
// SYN/ACK losses are summed over those connections; a connection that
// carried no transaction (a browser's unused pre-connect) is in no
// pageview.
//
// Pageview timing: Start is the Start of its first redirect or of its
// container (first SYN - rtt/2 on a fresh connection, request - rtt/2 on a
// reused one), End the load's end, Total = End - Start, split by
// CriticalPath over the transactions in the load. Flags are the union of
// their flags, plus evicted when a bound closed it early.
type Grouper struct {
	cfg     Config
	classes *Classes
	next    Sink

	now       int64 // latest capture time seen in any record
	settle    int64
	held      minheap.Heap[heldTx]
	seq       uint64
	lastStart int64

	clients map[clientKey]*client
	nextCID uint64
	refs    map[refKey]*pv
	lru     pv // sentinel of the open pageviews, least recently joined first
	nopen   int
	nmember int // transactions held by open and pending pageviews

	orphans  map[refKey][]*orphan
	orphanQ  []*orphan
	norphans int
	redirQ   []*redirect

	pending []*pv
	want    map[string]*pv // connection id -> pageview waiting for it

	connInfo map[string]connLosses
	connRing []string
	connPos  int

	inflight InFlightSource

	stats Stats
}

type clientKey struct {
	addr netip.Addr
	ua   string
}

type client struct {
	id      uint64
	key     clientKey
	open    []*pv // by container Start
	orphans int   // objects and redirects waiting
	redirs  []*redirect
	// referers counts the client's requests that carried a Referer: a
	// client that sends them sends none only for a page that asks so.
	referers int
}

type refKey struct {
	cid uint64
	url uint64 // 0: objects without a Referer
}

// heldTx keeps Start and End beside the pointer: heap compares stay in cache.
type heldTx struct {
	start, end int64
	seq        uint64
	tx         *reconstruct.Transaction
	refs       *pageRefs // what its body references (HTML or CSS), nil if none was read
}

// Before orders held transactions by start, then arrival.
func (a heldTx) Before(b heldTx) bool {
	if a.start != b.start {
		return a.start < b.start
	}
	return a.seq < b.seq
}

type orphan struct {
	h       heldTx
	c       *client
	key     refKey
	expires int64
	done    bool
}

// redirect is a navigation answered by a redirect, waiting for the request
// of its target (a chain of redirects waits as one).
type redirect struct {
	txs     []*reconstruct.Transaction
	c       *client
	target  uint64 // urlHash of the Location
	expires int64
	done    bool
}

type connLosses struct{ syn, synack int }

// pv is an open or pending pageview.
type pv struct {
	rec     Pageview
	c       *client
	members []*reconstruct.Transaction // container first, then objects in processing order
	redirs  []*reconstruct.Transaction
	// undecided are members forwarded only at close: their place in the
	// load (or after it) is known only then.
	undecided []*reconstruct.Transaction
	urlKeys   []uint64
	// declared holds what the container's HTML and the page's stylesheets
	// reference, by urlHash; nil when none could be read. htmlRead says the
	// container's own HTML was read.
	declared   map[uint64]embeds.Kind
	htmlRead   bool
	noReferrer bool // the page's HTML asks for no Referer on its objects
	favicon    bool // the page has its undeclared /favicon.ico (a browser asks once)
	keyless    bool // grouped by timing from HTTPS without keys (see keyless.go)
	referer    bool // some object joined by Referer
	// firstByte: when the container's first response byte reached the
	// client; objects found in the HTML start no earlier.
	firstByte int64
	end       int64
	// loadSoFar: the load's end as judged from the members so far, in
	// Start order (finish decides it for good).
	loadSoFar int64
	prev      *pv
	next      *pv
	missing   int
	closed    bool
	emitted   bool
	// awaited: kept open past its idle gap for a transaction in flight,
	// as found at inflightAt.
	awaited    bool
	inflightAt int64
	closedAt   int64
}

// maxURLKeys bounds the object URLs of one pageview that Referers may name.
const maxURLKeys = 256

// NewGrouper returns a Grouper forwarding to next. classes may be nil (every
// client in the default class).
func NewGrouper(cfg Config, classes *Classes, next Sink) *Grouper {
	if classes == nil {
		classes = DefaultClasses()
	}
	g := &Grouper{cfg: cfg.withDefaults(), classes: classes, next: next,
		clients: map[clientKey]*client{}, refs: map[refKey]*pv{}, orphans: map[refKey][]*orphan{},
		want: map[string]*pv{}, connInfo: map[string]connLosses{}}
	g.settle = int64(g.cfg.Settle)
	g.lru.prev, g.lru.next = &g.lru, &g.lru
	return g
}

// Stats returns the counters so far.
func (g *Grouper) Stats() Stats {
	s := g.stats
	s.Held, s.Open, s.Orphans, s.Pending = len(g.held), g.nopen, g.norphans, g.pendingCount()
	return s
}

func (g *Grouper) pendingCount() int {
	n := 0
	for _, p := range g.pending {
		if !p.emitted {
			n++
		}
	}
	return n
}

func (g *Grouper) advance(t int64) {
	if t > g.now {
		g.now = t
	}
}

// Advance moves the Grouper's clock to capture time now without a record
// and releases, processes and closes what is due by then. A sharded
// pipeline advances every shard's Grouper together once a second of
// capture time, so a shard whose clients fell quiet still closes their
// pageviews on time.
func (g *Grouper) Advance(now int64) {
	g.advance(now)
	g.release()
}

// Transaction takes a finished transaction (any order) and classifies it.
// A page body it carries is read now and dropped, so held transactions keep
// only the set of references.
func (g *Grouper) Transaction(tx *reconstruct.Transaction) {
	var refs *pageRefs
	if len(tx.Body) > 0 {
		refs = g.readPage(tx)
	}
	tx.Body = nil
	g.take(tx, refs)
}

// take holds a transaction, with what its body referenced (nil: none).
func (g *Grouper) take(tx *reconstruct.Transaction, refs *pageRefs) {
	g.stats.Transactions++
	g.classify(tx)
	g.advance(max(tx.RequestFirst, tx.RequestLast, tx.ResponseLast, tx.ResponseAcked))
	g.seq++
	h := heldTx{start: tx.Start, end: tx.End, seq: g.seq, tx: tx, refs: refs}
	g.held.Push(h)
	for len(g.held) > g.cfg.MaxHeld {
		g.stats.HeldOverflow++
		g.process(g.held.Pop())
	}
	g.release()
}

// Connection classifies a connection record and forwards it at once.
func (g *Grouper) Connection(c *reconstruct.Connection) {
	g.stats.Connections++
	g.advance(c.LastSeen)
	if c.Class == "" {
		c.Class, _ = g.classes.Classify(c.Client)
	}
	g.next.Connection(c)
	l := connLosses{c.SYNLosses, c.SYNACKLosses}
	if p := g.want[c.ID]; p != nil {
		delete(g.want, c.ID)
		g.claimConn(p, l)
	} else {
		if len(g.connRing) < g.cfg.MaxConnCache {
			g.connRing = append(g.connRing, c.ID)
		} else {
			if old := g.connRing[g.connPos]; old != "" {
				if _, ok := g.connInfo[old]; ok {
					delete(g.connInfo, old)
					g.stats.ConnCacheEvicted++
				}
			}
			g.connRing[g.connPos] = c.ID
			g.connPos = (g.connPos + 1) % len(g.connRing)
		}
		g.connInfo[c.ID] = l
	}
	g.release()
}

func (g *Grouper) claimConn(p *pv, l connLosses) {
	p.rec.SYNLosses += l.syn
	p.rec.SYNACKLosses += l.synack
	p.missing--
	if p.closed && p.missing == 0 && !p.emitted {
		g.emit(p)
	}
}

// Flush processes everything held and emits every pageview. Call it at end
// of input, after the tracker's Flush.
func (g *Grouper) Flush() {
	for len(g.held) > 0 {
		g.process(g.held.Pop())
	}
	for g.lru.next != &g.lru {
		g.close(g.lru.next)
	}
	for _, o := range g.orphanQ {
		g.expireOrphan(o)
	}
	g.orphanQ = g.orphanQ[:0]
	for _, r := range g.redirQ {
		g.expireRedirect(r)
	}
	g.redirQ = g.redirQ[:0]
	for _, p := range g.pending {
		g.expirePending(p)
	}
	g.pending = g.pending[:0]
}

// release processes the held transactions whose End is Settle behind packet
// time, in Start order, then closes what went idle.
func (g *Grouper) release() {
	wm := g.now - g.settle
	for len(g.held) > 0 && g.held[0].end <= wm {
		g.process(g.held.Pop())
	}
	// Everything that starts before pw has been processed (late arrivals
	// aside), so pageviews idle before pw can take no more objects.
	pw := wm
	if len(g.held) > 0 {
		pw = min(pw, g.held[0].start)
	}
	for p := g.lru.next; p != &g.lru && p.end+int64(g.cfg.IdleGap) < pw; {
		next := p.next
		if !g.awaitsInFlight(p) {
			g.close(p)
		}
		p = next
	}
	g.orphanQ = expireHead(g.orphanQ, func(o *orphan, _ int) bool { return o.done || o.expires < pw }, g.expireOrphan)
	g.redirQ = expireHead(g.redirQ, func(r *redirect, _ int) bool { return r.done || r.expires < pw }, g.expireRedirect)
	g.pending = expireHead(g.pending, g.pendingDue, g.expirePending)
}

// expireHead expires the entries at the head of queue q (kept in expiry
// order) for which due, given the entry and the queue's length from it on,
// holds; it returns the rest. expire must not touch q.
func expireHead[T any](q []*T, due func(*T, int) bool, expire func(*T)) []*T {
	n := 0
	for n < len(q) && due(q[n], len(q)-n) {
		expire(q[n])
		q[n] = nil
		n++
	}
	return q[n:]
}

// pendingDue reports whether the head of the pending queue (of length n)
// must go out now: emitted already, waited ConnWait, or the queue is full.
func (g *Grouper) pendingDue(p *pv, n int) bool {
	switch {
	case p.emitted, p.closedAt+int64(g.cfg.ConnWait) < g.now:
		return true
	case n > g.cfg.MaxPending:
		g.stats.PendingOverflow++
		return true
	}
	return false
}

func (g *Grouper) expirePending(p *pv) {
	if p.emitted {
		return
	}
	g.stats.MissingConnections++
	p.rec.Flags |= reconstruct.FlagIncomplete
	for _, tx := range p.members {
		if tx.Index == 0 && g.want[tx.ConnectionID] == p {
			delete(g.want, tx.ConnectionID)
		}
	}
	for _, tx := range p.redirs {
		if tx.Index == 0 && g.want[tx.ConnectionID] == p {
			delete(g.want, tx.ConnectionID)
		}
	}
	g.emit(p)
}

func (g *Grouper) standAlone(tx *reconstruct.Transaction) {
	g.stats.StandAlone++
	g.forward(tx, "")
}

func (g *Grouper) forward(tx *reconstruct.Transaction, pvID string) {
	tx.PageviewID = pvID
	// The store keeps a redirect's Location, so that grouping again from
	// it (package stitch) follows the redirect: redacted as URLs are
	// (twice changes nothing, so the hashes still match).
	tx.Location = g.cfg.Redaction.Redact(tx.Location)
	g.next.Transaction(tx)
}

// classify stamps a transaction with its client's class once, on arrival;
// its pageview takes the class from its container. A transaction that
// arrives classified (Classify in front of a tap) keeps its class.
func (g *Grouper) classify(tx *reconstruct.Transaction) {
	if tx.Class == "" {
		tx.Class, tx.Priority = g.classes.Classify(tx.Client)
	}
}
