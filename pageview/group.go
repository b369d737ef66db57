package pageview

import (
	"container/heap"
	"encoding/hex"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
	"time"

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
	// Window bounds attachment without a Referer: such an object must start
	// within Window of the container's Start (and within IdleGap of the
	// pageview's latest End).
	Window time.Duration
	// OrphanWait is how long an object that matched no open pageview waits
	// (from its Start) for a container processed later to adopt it, before it
	// goes out stand-alone.
	OrphanWait time.Duration
	// ConnWait is how long a closed pageview waits for the connection records
	// of the connections it opened (they carry the SYN loss counts).
	ConnWait time.Duration

	MaxHeld      int // transactions held for reordering
	MaxOpen      int // open pageviews
	MaxPerClient int // open pageviews per client (address + User-Agent)
	MaxObjects   int // transactions per pageview
	// MaxMembers bounds the transactions held in open and pending pageviews
	// altogether (they are kept for timing and HAR output until emitted).
	MaxMembers   int
	MaxOrphans   int // objects waiting for a container
	MaxPending   int // closed pageviews waiting for connection records
	MaxConnCache int // connection records remembered until their pageview claims them
}

// Defaults for Config's zero values.
const (
	DefaultSettle       = 2 * time.Second
	DefaultIdleGap      = 5 * time.Second
	DefaultWindow       = 10 * time.Second
	DefaultOrphanWait   = 10 * time.Second
	DefaultConnWait     = 15 * time.Second
	DefaultMaxHeld      = 1 << 20
	DefaultMaxOpen      = 1 << 18
	DefaultMaxPerClient = 8
	DefaultMaxObjects   = 2000
	DefaultMaxMembers   = 1 << 21
	DefaultMaxOrphans   = 1 << 17
	DefaultMaxPending   = 1 << 18
	DefaultMaxConnCache = 1 << 18
)

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Settle, DefaultSettle)
	def(&c.IdleGap, DefaultIdleGap)
	def(&c.Window, DefaultWindow)
	def(&c.OrphanWait, DefaultOrphanWait)
	def(&c.ConnWait, DefaultConnWait)
	defInt(&c.MaxHeld, DefaultMaxHeld)
	defInt(&c.MaxOpen, DefaultMaxOpen)
	defInt(&c.MaxPerClient, DefaultMaxPerClient)
	defInt(&c.MaxObjects, DefaultMaxObjects)
	defInt(&c.MaxMembers, DefaultMaxMembers)
	defInt(&c.MaxOrphans, DefaultMaxOrphans)
	defInt(&c.MaxPending, DefaultMaxPending)
	defInt(&c.MaxConnCache, DefaultMaxConnCache)
	return c
}

// Stats counts what the Grouper did. Overflow counters say where a bound
// changed the result; no record is ever dropped.
type Stats struct {
	Transactions uint64 `json:"transactions"`
	Connections  uint64 `json:"connections"`
	Pageviews    uint64 `json:"pageviews"`
	ByReferer    uint64 `json:"by_referer"`    // objects attached by Referer
	ByConnection uint64 `json:"by_connection"` // objects without Referer attached by their connection's previous transaction
	ByWindow     uint64 `json:"by_window"`     // objects attached by time window
	Adopted      uint64 `json:"adopted"`       // objects attached to a container processed after them
	StandAlone   uint64 `json:"stand_alone"`
	// Late counts transactions processed after a transaction that started
	// later (they completed more than Settle after it): grouping may have
	// missed them.
	Late uint64 `json:"late"`
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

// Tags are what the pageview stage adds to a transaction.
type Tags struct {
	PageviewID string // empty for a stand-alone transaction
	Class      string
	Priority   string
}

// TaggedSink is implemented by sinks that also want the class's priority,
// which the transaction record does not carry (its PageviewID and Class
// fields are set either way); the Grouper then calls TaggedTransaction
// instead of Transaction.
type TaggedSink interface {
	TaggedTransaction(*reconstruct.Transaction, Tags)
}

// Grouper is the streaming pageview stage: a reconstruct.Sink that groups
// transactions into pageviews and forwards every record, classified, to a
// Sink. Not safe for concurrent use. At end of input call the tracker's
// Flush first, then the Grouper's.
//
// Grouping rules:
//   - A container is a transaction whose response Content-Type is HTML
//     (text/html, application/xhtml+xml). Without a Content-Type (304, HEAD,
//     cut responses) the request's Accept decides when it is specific
//     (text/html or xhtml first: container; another type: object), else the
//     URL shape (ends in "/", .html, .htm, .php, .asp, .aspx, .jsp, or has no
//     extension). Every container starts a pageview, iframes and HTML
//     fetched by scripts included: from headers alone an iframe cannot be
//     told from a click on a link.
//   - A client is an address plus User-Agent, so browsers behind one NAT
//     address stay apart.
//   - An object with a Referer joins the client's most recent open pageview
//     whose container, or one of whose objects (stylesheets refer their
//     images), has that URL (host compared case-insensitively without a
//     default port, then path and query; a relative Referer takes the
//     object's Host; a fragment is ignored). An object without a Referer
//     joins, on a reused connection, the pageview of that connection's
//     previous transaction (an older page still loading keeps its
//     connections), else the client's newest pageview; either only if it
//     starts within Window of the container's Start. Every object must start
//     no earlier than the container and within IdleGap of the pageview's
//     latest End.
//   - A new container of a client makes the older pageviews of that client
//     stop taking objects without a Referer; they still take objects whose
//     Referer names them until they go idle, so two overlapping page loads
//     (a click during a SYN-loss wait) keep their own objects.
//   - Transactions arrive in completion order. Each is held until packet
//     time is Settle past its End, then processed in Start order. An object
//     that matches nothing waits up to OrphanWait for a container processed
//     later (a container that took longer than its objects) that it would
//     have matched; then it goes out stand-alone (empty PageviewID).
//
// Transactions are forwarded as soon as they are processed; a pageview
// record follows when it closes and the records of the connections it opened
// (those whose first transaction, Index 0, is in it) have arrived, or
// ConnWait has passed (Flags then include incomplete). SYN and SYN/ACK
// losses are summed over those connections; a connection that carried no
// transaction (a browser's unused pre-connect) is in no pageview.
//
// Pageview timing: Start is the container's Start (first SYN - rtt/2 on a
// fresh connection, request - rtt/2 on a reused one), End the latest End of
// its transactions, Total = End - Start, split by CriticalPath. Flags are the
// union of its transactions' flags, plus evicted when a bound closed it
// early.
type Grouper struct {
	cfg     Config
	classes *Classes
	next    Sink
	tagged  TaggedSink

	now       int64 // latest capture time seen in any record
	settle    int64
	held      txHeap
	seq       uint64
	lastStart int64

	clients map[clientKey]*client
	nextCID uint64
	refs    map[refKey]*pv
	connPV  map[string]*pv // connection id -> open pageview of its latest transaction
	lru     pv             // sentinel of the open pageviews, least recently joined first
	nopen   int
	nmember int // transactions held by open and pending pageviews

	orphans  map[refKey][]*orphan
	orphanQ  []*orphan
	norphans int

	pending []*pv
	want    map[string]*pv // connection id -> pageview waiting for it

	connInfo map[string]connLosses
	connRing []string
	connPos  int

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
	orphans int
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
}

type txHeap []heldTx

func (h txHeap) Len() int { return len(h) }
func (h txHeap) Less(i, j int) bool {
	if h[i].start != h[j].start {
		return h[i].start < h[j].start
	}
	return h[i].seq < h[j].seq
}
func (h txHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *txHeap) Push(x any)   { *h = append(*h, x.(heldTx)) }
func (h *txHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = heldTx{}
	*h = old[:len(old)-1]
	return x
}

type orphan struct {
	tx      *reconstruct.Transaction
	c       *client
	key     refKey
	expires int64
	done    bool
}

type connLosses struct{ syn, synack int }

// pv is an open or pending pageview.
type pv struct {
	rec      Pageview
	c        *client
	members  []*reconstruct.Transaction
	urlKeys  []uint64
	end      int64
	prev     *pv
	next     *pv
	missing  int
	closed   bool
	emitted  bool
	closedAt int64
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
		connPV: map[string]*pv{}, want: map[string]*pv{}, connInfo: map[string]connLosses{}}
	g.tagged, _ = next.(TaggedSink)
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

// Transaction takes a finished transaction (any order).
func (g *Grouper) Transaction(tx *reconstruct.Transaction) {
	g.stats.Transactions++
	g.advance(max(tx.RequestFirst, tx.RequestLast, tx.ResponseLast, tx.ResponseAcked))
	g.seq++
	heap.Push(&g.held, heldTx{start: tx.Start, end: tx.End, seq: g.seq, tx: tx})
	for len(g.held) > g.cfg.MaxHeld {
		g.stats.HeldOverflow++
		g.process(heap.Pop(&g.held).(heldTx).tx)
	}
	g.release()
}

// Connection classifies a connection record and forwards it at once.
func (g *Grouper) Connection(c *reconstruct.Connection) {
	g.stats.Connections++
	g.advance(c.LastSeen)
	c.Class, _ = g.classes.Classify(c.Client)
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
		g.process(heap.Pop(&g.held).(heldTx).tx)
	}
	for g.lru.next != &g.lru {
		g.close(g.lru.next)
	}
	for _, o := range g.orphanQ {
		g.expireOrphan(o)
	}
	g.orphanQ = g.orphanQ[:0]
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
		g.process(heap.Pop(&g.held).(heldTx).tx)
	}
	// Everything that starts before pw has been processed (late arrivals
	// aside), so pageviews idle before pw can take no more objects.
	pw := wm
	if len(g.held) > 0 {
		pw = min(pw, g.held[0].start)
	}
	for p := g.lru.next; p != &g.lru && p.end+int64(g.cfg.IdleGap) < pw; p = g.lru.next {
		g.close(p)
	}
	n := 0
	for n < len(g.orphanQ) && (g.orphanQ[n].done || g.orphanQ[n].expires < pw) {
		g.expireOrphan(g.orphanQ[n])
		g.orphanQ[n] = nil
		n++
	}
	if n > 0 {
		g.orphanQ = g.orphanQ[n:]
	}
	n = 0
	for n < len(g.pending) && g.pendingDue(g.pending[n], len(g.pending)-n) {
		g.expirePending(g.pending[n])
		g.pending[n] = nil
		n++
	}
	if n > 0 {
		g.pending = g.pending[n:]
	}
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

func (g *Grouper) expireOrphan(o *orphan) {
	if o.done {
		return
	}
	o.done = true
	g.norphans--
	o.c.orphans--
	if list := g.orphans[o.key]; len(list) > 0 {
		list = slices.DeleteFunc(list, func(x *orphan) bool { return x == o })
		if len(list) == 0 {
			delete(g.orphans, o.key)
		} else {
			g.orphans[o.key] = list
		}
	}
	g.dropClientIfIdle(o.c)
	g.standAlone(o.tx)
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
	g.emit(p)
}

func (g *Grouper) standAlone(tx *reconstruct.Transaction) {
	g.stats.StandAlone++
	g.forward(tx, "")
}

func (g *Grouper) forward(tx *reconstruct.Transaction, pvID string) {
	name, prio := g.classes.Classify(tx.Client)
	tx.PageviewID, tx.Class = pvID, name
	if g.tagged != nil {
		g.tagged.TaggedTransaction(tx, Tags{PageviewID: pvID, Class: name, Priority: prio})
		return
	}
	g.next.Transaction(tx)
}

func (g *Grouper) process(tx *reconstruct.Transaction) {
	if tx.Start < g.lastStart {
		g.stats.Late++
	} else {
		g.lastStart = tx.Start
	}
	defer g.shed()
	key := clientKey{tx.Client, tx.UserAgent}
	if IsContainer(tx) {
		g.open(g.client(key), tx)
		return
	}
	c := g.clients[key]
	ref := uint64(0)
	if tx.Referer != "" {
		host, path := splitReferer(tx.Referer, tx.Host)
		ref = urlHash(host, path)
	}
	if c != nil {
		if ref != 0 {
			if p := g.refs[refKey{c.id, ref}]; p != nil && g.canTake(p, tx, false) {
				g.stats.ByReferer++
				g.attach(p, tx)
				return
			}
		} else if p := g.connPV[tx.ConnectionID]; p != nil && p.c == c && g.canTake(p, tx, true) {
			g.stats.ByConnection++
			g.attach(p, tx)
			return
		} else if n := len(c.open); n > 0 && g.canTake(c.open[n-1], tx, true) {
			g.stats.ByWindow++
			g.attach(c.open[n-1], tx)
			return
		}
	}
	if g.norphans >= g.cfg.MaxOrphans {
		g.stats.OrphanOverflow++
		g.standAlone(tx)
		return
	}
	if c == nil {
		c = g.client(key)
	}
	o := &orphan{tx: tx, c: c, key: refKey{c.id, ref}, expires: tx.Start + int64(g.cfg.OrphanWait)}
	g.orphans[o.key] = append(g.orphans[o.key], o)
	g.orphanQ = append(g.orphanQ, o)
	g.norphans++
	c.orphans++
}

func (g *Grouper) canTake(p *pv, tx *reconstruct.Transaction, window bool) bool {
	earliest := tx.Start
	if !window && tx.RequestFirst != 0 {
		// An object named by its Referer may sit on a connection the browser
		// opened before the page started (a spare socket used within the
		// preconnect threshold); what must follow the page is the request.
		earliest = tx.RequestFirst - tx.RTTClient/2
	}
	if p.closed || earliest < p.rec.Start || tx.Start > p.end+int64(g.cfg.IdleGap) {
		return false
	}
	if window && tx.Start > p.rec.Start+int64(g.cfg.Window) {
		return false
	}
	if len(p.members) >= g.cfg.MaxObjects {
		g.stats.ObjectOverflow++
		return false
	}
	return true
}

func (g *Grouper) client(key clientKey) *client {
	c := g.clients[key]
	if c == nil {
		g.nextCID++
		c = &client{id: g.nextCID, key: key}
		g.clients[key] = c
	}
	return c
}

func (g *Grouper) dropClientIfIdle(c *client) {
	if len(c.open) == 0 && c.orphans == 0 && g.clients[c.key] == c {
		delete(g.clients, c.key)
	}
}

// open starts a pageview at container tx and adopts the orphans it would
// have taken.
func (g *Grouper) open(c *client, tx *reconstruct.Transaction) {
	for len(c.open) >= g.cfg.MaxPerClient {
		g.stats.PerClientOverflow++
		c.open[0].rec.Flags |= reconstruct.FlagEvicted
		g.close(c.open[0])
	}
	if g.nopen >= g.cfg.MaxOpen {
		g.stats.OpenOverflow++
		g.lru.next.rec.Flags |= reconstruct.FlagEvicted
		g.close(g.lru.next)
	}
	g.stats.Pageviews++
	name, prio := g.classes.Classify(tx.Client)
	p := &pv{c: c, end: tx.End, rec: Pageview{
		ID: ID(tx.ID), Interface: tx.Interface, Client: tx.Client, UserAgent: tx.UserAgent,
		Class: name, Priority: prio, Server: tx.Server, Host: tx.Host, URL: tx.URL,
		Status: tx.Status, ContainerID: tx.ID, Start: tx.Start,
	}}
	i := len(c.open)
	for i > 0 && c.open[i-1].rec.Start > tx.Start {
		i--
	}
	c.open = slices.Insert(c.open, i, p)
	p.prev, p.next = g.lru.prev, &g.lru
	g.lru.prev.next = p
	g.lru.prev = p
	g.nopen++
	g.attach(p, tx)

	adopt := func(k refKey, window bool) {
		list := g.orphans[k]
		if len(list) == 0 {
			return
		}
		kept := list[:0]
		for _, o := range list {
			if !o.done && g.canTake(p, o.tx, window) {
				o.done = true
				g.norphans--
				c.orphans--
				g.stats.Adopted++
				g.attach(p, o.tx)
				continue
			}
			if !o.done {
				kept = append(kept, o)
			}
		}
		if len(kept) == 0 {
			delete(g.orphans, k)
		} else {
			g.orphans[k] = kept
		}
	}
	if tx.URL != "" {
		host, path := splitURL(tx.URL, tx.Host)
		adopt(refKey{c.id, urlHash(host, path)}, false)
	}
	adopt(refKey{c.id, 0}, true)
}

func (g *Grouper) attach(p *pv, tx *reconstruct.Transaction) {
	p.members = append(p.members, tx)
	g.nmember++
	p.end = max(p.end, tx.End)
	if tx.ConnectionID != "" {
		g.connPV[tx.ConnectionID] = p
	}
	if len(p.urlKeys) < maxURLKeys && tx.URL != "" {
		host, path := splitURL(tx.URL, tx.Host)
		k := urlHash(host, path)
		p.urlKeys = append(p.urlKeys, k)
		g.refs[refKey{p.c.id, k}] = p
	}
	if p.next != &g.lru { // most recently joined last
		p.prev.next, p.next.prev = p.next, p.prev
		p.prev, p.next = g.lru.prev, &g.lru
		g.lru.prev.next = p
		g.lru.prev = p
	}
	if tx.Index == 0 && tx.ConnectionID != "" {
		// The pageview opened this connection: its SYN losses are ours.
		if l, ok := g.connInfo[tx.ConnectionID]; ok {
			delete(g.connInfo, tx.ConnectionID)
			p.rec.SYNLosses += l.syn
			p.rec.SYNACKLosses += l.synack
		} else if g.want[tx.ConnectionID] == nil {
			g.want[tx.ConnectionID] = p
			p.missing++
		}
	}
	g.forward(tx, p.rec.ID)
}

// close ends a pageview: it takes no more objects; its record goes out once
// its connections' records are in.
func (g *Grouper) close(p *pv) {
	if p.closed {
		return
	}
	p.closed = true
	c := p.c
	if i := slices.Index(c.open, p); i >= 0 {
		c.open = slices.Delete(c.open, i, i+1)
	}
	g.dropClientIfIdle(c)
	for _, k := range p.urlKeys {
		rk := refKey{c.id, k}
		if g.refs[rk] == p {
			delete(g.refs, rk)
		}
	}
	p.urlKeys = nil
	for _, tx := range p.members {
		if g.connPV[tx.ConnectionID] == p {
			delete(g.connPV, tx.ConnectionID)
		}
	}
	p.prev.next, p.next.prev = p.next, p.prev
	p.prev, p.next = nil, nil
	g.nopen--
	finish(&p.rec, p.members)
	p.closedAt = g.now
	if p.missing == 0 {
		g.emit(p)
		return
	}
	g.pending = append(g.pending, p)
}

func (g *Grouper) emit(p *pv) {
	p.emitted = true
	p.rec.FlagNames = p.rec.Flags.Names()
	p.rec.Transactions = p.members
	g.next.Pageview(&p.rec)
	// The record now belongs to the sink; only our own reference goes.
	g.nmember -= len(p.members)
	p.members = nil
}

// shed keeps the transactions held by pageviews under MaxMembers: pending
// pageviews go out first (they only wait for SYN loss counts), then the
// least recently joined open ones close early.
func (g *Grouper) shed() {
	for g.nmember > g.cfg.MaxMembers {
		if len(g.pending) > 0 {
			p := g.pending[0]
			g.pending[0] = nil
			g.pending = g.pending[1:]
			if !p.emitted {
				g.stats.PendingOverflow++
				g.expirePending(p)
			}
			continue
		}
		if g.nopen == 0 {
			return
		}
		g.stats.MemberOverflow++
		g.lru.next.rec.Flags |= reconstruct.FlagEvicted
		g.close(g.lru.next)
	}
}

// finish fills a pageview's totals from its transactions (container first).
func finish(r *Pageview, members []*reconstruct.Transaction) {
	r.Start, r.End = members[0].Start, members[0].End
	ids := make([]string, 0, len(members))
	for _, tx := range members {
		if r.ContainerID == "" {
			r.Start = min(r.Start, tx.Start)
		}
		// With a container, the page starts there even if an object's
		// connection was opened earlier (a browser's spare socket): the user
		// was not waiting on it yet.
		r.End = max(r.End, tx.End)
		r.Bytes += tx.ResponseBytes
		r.RetransBytes += tx.RetransBytes
		r.Flags |= tx.Flags
		ids = append(ids, tx.ConnectionID)
	}
	slices.Sort(ids)
	r.Connections = len(slices.Compact(ids))
	r.Objects = len(members) - 1
	r.Total = r.End - r.Start
	r.Tconn, r.Tserver, r.Ttransfer, r.Tother = CriticalPath(members, r.Start, r.End)
}

// CriticalPath attributes [start, end) to connect, server, transfer and other
// time along the critical path of a pageview's transactions, so that
// tconn+tserver+ttransfer+tother == end-start exactly.
//
// Walking back from t = end: among the transactions that started before t,
// take the one whose End is latest, capped at t (the one that was running
// last before t, or else the one whose completion came last before t: the
// predecessor that gated what followed). The gap between its capped End and
// t is other time (the client parsing, or idle); its own time from its Start
// to the capped End is split along its phases in order (connect, request,
// server, transfer; request upload counts as other), cut where the cap falls.
// Then t moves to its Start, until t reaches start; time before the first
// transaction is other. Ties on End go to the transaction that started first.
func CriticalPath(members []*reconstruct.Transaction, start, end int64) (tconn, tserver, ttransfer, tother int64) {
	n := len(members)
	if n == 0 || end <= start {
		return 0, 0, 0, max(end-start, 0)
	}
	byStart := make([]*reconstruct.Transaction, n)
	copy(byStart, members)
	slices.SortStableFunc(byStart, func(a, b *reconstruct.Transaction) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	// best[i]: index of the latest-ending transaction among byStart[:i+1].
	best := make([]int, n)
	for i := range byStart {
		best[i] = i
		if i > 0 && byStart[best[i-1]].End >= byStart[i].End {
			best[i] = best[i-1]
		}
	}
	t, k := end, n
	for t > start {
		for k > 0 && byStart[k-1].Start >= t {
			k--
		}
		if k == 0 {
			tother += t - start
			break
		}
		p := byStart[best[k-1]]
		s := max(p.Start, start)
		e := max(min(p.End, t), s)
		tother += t - e
		rest := e - s
		take := func(v int64) int64 {
			v = min(max(v, 0), rest)
			rest -= v
			return v
		}
		tconn += take(p.Tconn)
		tother += take(p.Trequest)
		tserver += take(p.Tserver)
		ttransfer += take(p.Ttransfer)
		tother += rest // components short of End-Start (inconsistent record)
		t = s
	}
	return tconn, tserver, ttransfer, tother
}

// ID is the pageview id of a container transaction id: stable across
// re-ingests of the same capture, and safe as a file name (hex).
func ID(containerTxID string) string {
	h := fnv.New64a()
	h.Write([]byte("pageview\x00"))
	h.Write([]byte(containerTxID))
	return hex.EncodeToString(h.Sum(nil))
}

// IsContainer reports whether a transaction is an HTML page that starts a
// pageview (see Grouper for the rules).
func IsContainer(tx *reconstruct.Transaction) bool {
	if tx.ContentType != "" {
		return isHTML(tx.ContentType)
	}
	if a := strings.TrimSpace(tx.Accept); a != "" && !strings.HasPrefix(a, "*/*") {
		return isHTML(a)
	}
	if tx.URL == "" {
		return false
	}
	_, path := splitURL(tx.URL, "")
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return true
	}
	seg := path[strings.LastIndexByte(path, '/')+1:]
	dot := strings.LastIndexByte(seg, '.')
	if dot < 0 {
		return true
	}
	switch ext := seg[dot+1:]; {
	case strings.EqualFold(ext, "html"), strings.EqualFold(ext, "htm"), strings.EqualFold(ext, "php"),
		strings.EqualFold(ext, "asp"), strings.EqualFold(ext, "aspx"), strings.EqualFold(ext, "jsp"):
		return true
	}
	return false
}

// isHTML reports whether a media type (or an Accept list, by its first
// entry) is HTML.
func isHTML(v string) bool {
	v = strings.TrimSpace(v)
	if i := strings.IndexAny(v, ";,"); i >= 0 {
		v = strings.TrimSpace(v[:i])
	}
	return strings.EqualFold(v, "text/html") || strings.EqualFold(v, "application/xhtml+xml")
}

// splitURL splits a request target into host and path+query: an
// absolute-form target ("http://h/p") carries its own host, an origin-form
// one ("/p") takes host.
func splitURL(u, host string) (string, string) {
	rest, ok := cutScheme(u)
	if !ok {
		return host, u
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		return rest[:i], rest[i:]
	}
	return rest, "/"
}

// splitReferer splits a Referer like splitURL and drops a fragment.
func splitReferer(ref, host string) (string, string) {
	h, p := splitURL(ref, host)
	if i := strings.IndexByte(p, '#'); i >= 0 {
		p = p[:i]
	}
	if p == "" {
		p = "/"
	}
	return h, p
}

func cutScheme(u string) (string, bool) {
	switch {
	case len(u) >= 7 && strings.EqualFold(u[:7], "http://"):
		return u[7:], true
	case len(u) >= 8 && strings.EqualFold(u[:8], "https://"):
		return u[8:], true
	case strings.HasPrefix(u, "//"):
		return u[2:], true
	}
	return u, false
}

// urlHash keys a URL for Referer matching: host without userinfo or a
// default port, lower-cased, then path and query. Never 0 (0 means "no
// Referer").
func urlHash(host, path string) uint64 {
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	host = strings.TrimSuffix(host, ":80")
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(host); i++ {
		b := host[i]
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		h = (h ^ uint64(b)) * prime
	}
	h = (h ^ 0) * prime
	for i := 0; i < len(path); i++ {
		h = (h ^ uint64(path[i])) * prime
	}
	if h == 0 {
		h = 1
	}
	return h
}
