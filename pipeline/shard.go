package pipeline

import (
	"net/netip"
	"slices"
	"sync"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/web"
)

// clientShards is how many client shards the records are grouped in,
// whatever the number of workers. Each shard has a pageview Grouper of its
// own, and each worker runs a fixed subset of the shards behind one
// tracker, so a shard is fed the same records in the same order for any
// number of workers: the output does not depend on it. 64 spreads the load
// of a few thousand clients evenly over the cores of one machine.
const clientShards = 64

// sharder assigns a connection to a client shard from its endpoints: the
// client's address decides, so a client's connections and pageviews stay in
// one shard. It is symmetric (either direction of a packet, and the records
// of its connection, give the same shard) and needs no connection state:
// the server side is told by the tracker's ServerPorts and ServerNets, then
// the usual web ports, then the lower well-known port, then the lower port.
type sharder struct {
	ports []uint16
	nets  []netip.Prefix
}

func newSharder(cfg reconstruct.Config) *sharder {
	return &sharder{ports: cfg.ServerPorts, nets: cfg.ServerNets}
}

func (s *sharder) packet(p *capture.Packet) int {
	return s.of(p.SrcIP, p.SrcPort, p.DstIP, p.DstPort)
}

func (s *sharder) of(a netip.Addr, ap uint16, b netip.Addr, bp uint16) int {
	switch s.serverSide(a, ap, b, bp) {
	case serverB:
		return addrShard(a)
	case serverA:
		return addrShard(b)
	}
	return (addrShard(a) + addrShard(b)) % clientShards
}

const (
	serverUnknown = iota
	serverA
	serverB
)

func (s *sharder) serverSide(a netip.Addr, ap uint16, b netip.Addr, bp uint16) int {
	if side := sideOf(slices.Contains(s.ports, ap), slices.Contains(s.ports, bp)); side != serverUnknown {
		return side
	}
	if len(s.nets) > 0 {
		inA, inB := false, false
		for _, n := range s.nets {
			inA = inA || n.Contains(a)
			inB = inB || n.Contains(b)
		}
		if side := sideOf(inA, inB); side != serverUnknown {
			return side
		}
	}
	if side := sideOf(isWebPort(ap), isWebPort(bp)); side != serverUnknown {
		return side
	}
	if side := sideOf(ap < 1024, bp < 1024); side != serverUnknown {
		return side
	}
	return sideOf(ap < bp, bp < ap)
}

// isWebPort tells the ports web servers and proxies listen on besides the
// well-known ones: old Windows clients take ephemeral ports from 1025 up,
// below 8080. A switch, not a list to search: the reader asks it twice for
// every packet it deals out.
func isWebPort(p uint16) bool {
	switch p {
	case 80, 443, 3128, 8000, 8008, 8080, 8443, 8888:
		return true
	}
	return false
}

// sideOf names the side for which only isA or only isB holds.
func sideOf(isA, isB bool) int {
	switch {
	case isA && !isB:
		return serverA
	case isB && !isA:
		return serverB
	}
	return serverUnknown
}

// addrShard hashes an address (FNV-1a over its 16-byte form, so an IPv4
// address and its IPv4-mapped form agree) to a shard. The reader hashes
// every packet it deals out, one multiplication after the other, so an
// IPv4 address starts from the hash of its fixed ::ffff: prefix.
func addrShard(a netip.Addr) int {
	if a.Is4() {
		b := a.As4()
		return int(fnv1a(fnvV4Mapped, b[:]) % clientShards)
	}
	b := a.As16()
	h, rest := uint32(fnvOffset), b[:]
	if [12]byte(b[:12]) == v4MappedPrefix {
		h, rest = fnvV4Mapped, b[12:]
	}
	return int(fnv1a(h, rest) % clientShards)
}

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

var (
	v4MappedPrefix = [12]byte{10: 0xff, 11: 0xff}
	fnvV4Mapped    = fnv1a(fnvOffset, v4MappedPrefix[:])
)

func fnv1a(h uint32, b []byte) uint32 {
	for _, c := range b {
		h ^= uint32(c)
		h *= fnvPrime
	}
	return h
}

// tagged is a record on its way out of a worker, with where it was made:
// the input event (packet, clock tick or end of input) whose processing
// emitted it, and the client shard. Records leave the pipeline ordered by
// (event, shard), then in the order their shard emitted them: the same
// order for any number of workers.
type tagged struct {
	seq   uint64
	shard int
	rec   any // *reconstruct.Connection, *reconstruct.Transaction or *pageview.Pageview
}

func (a *tagged) before(b *tagged) bool { return a.pos().before(b.pos()) }

func (a *tagged) pos() position { return position{a.seq, a.shard} }

// worker runs one tracker and the Groupers of its client shards on one
// goroutine.
type worker struct {
	tracker  *reconstruct.Tracker
	groupers [clientShards]*pageview.Grouper // nil for other workers' shards
	own      []int                           // this worker's shards, ascending
	sharder  *sharder
	seq      uint64   // the event being processed
	out      []tagged // records emitted so far and not yet handed on
	evStart  int      // where the current event's records begin in out
}

// newWorker builds worker index of n with its shards' Groupers. tap, if
// not nil, wraps the sink between the tracker and the Groupers (the live
// feed's counting).
func newWorker(index, n int, tcfg reconstruct.Config, gcfg pageview.Config, classes *pageview.Classes, feed *web.LiveFeed) *worker {
	w := &worker{sharder: newSharder(tcfg)}
	split := gcfg.Split(clientShards)
	for s := index; s < clientShards; s += n {
		w.own = append(w.own, s)
		w.groupers[s] = pageview.NewGrouper(split, classes, &shardOut{w: w, shard: s})
	}
	var trackerOut reconstruct.Sink = w
	if feed != nil {
		// Count before the Groupers, which hold transactions for seconds:
		// the live chart must follow traffic within 2 s. Classify first so
		// the tap and the Grouper share one class lookup per record.
		trackerOut = pageview.Classify(classes, feed.Tap(w, nil))
	}
	w.tracker = reconstruct.NewTracker(tcfg.Split(n), trackerOut)
	for _, s := range w.own {
		w.groupers[s].WatchInFlight(w.tracker)
	}
	return w
}

// grouper is the Grouper of the shard of a record with these endpoints.
func (w *worker) grouper(client netip.Addr, cport uint16, server netip.Addr, sport uint16) *pageview.Grouper {
	if g := w.groupers[w.sharder.of(client, cport, server, sport)]; g != nil {
		return g
	}
	// Unreachable: packets and records of a connection have the same
	// endpoints, and the shard is symmetric in them.
	return w.groupers[w.own[0]]
}

// Connection and Transaction route the tracker's records to their shard.
func (w *worker) Connection(c *reconstruct.Connection) {
	w.grouper(c.Client, c.ClientPort, c.Server, c.ServerPort).Connection(c)
}

func (w *worker) Transaction(x *reconstruct.Transaction) {
	w.grouper(x.Client, x.ClientPort, x.Server, x.ServerPort).Transaction(x)
}

func (w *worker) begin(seq uint64) {
	w.seq, w.evStart = seq, len(w.out)
}

// endEvent puts the event's records in shard order, keeping each shard's
// own order: within one event a worker emits for its shards interleaved
// (a sweep expires connections by activity), another worker count
// interleaves them differently.
func (w *worker) endEvent() {
	ev := w.out[w.evStart:]
	if len(ev) > 1 {
		slices.SortStableFunc(ev, func(a, b tagged) int { return a.shard - b.shard })
	}
}

func (w *worker) packet(seq uint64, now int64, p *capture.Packet) {
	w.begin(seq)
	w.tracker.Advance(now)
	w.tracker.Packet(p)
	w.endEvent()
}

// tick advances the tracker and every Grouper to capture time now: all
// workers get it at the same point of the input.
func (w *worker) tick(seq uint64, now int64) {
	w.begin(seq)
	w.tracker.Advance(now)
	for _, s := range w.own {
		w.groupers[s].Advance(now)
	}
	w.endEvent()
}

// end flushes everything at the end of the input, a client shard at a
// time: the tracker ends the shard's connections, then the shard's Grouper
// flushes. The records come out as they did when the whole tracker ended
// first (each shard's in its order, the shards in turn), and handOn takes
// each of this worker's shards' records before the next one's are made:
// at the end of a capture with 2.9M connections open, holding them all at
// once took 0.3-0.4 GB beyond what the open connections had.
//
// With several workers, turns (if not nil) has them end their shards one
// at a time, in shard order, the order the records leave in anyway.
// Ending shards side by side made records faster than the collector could
// free the states they came from: with 2.9M connections open, two workers
// took 0.3 GB more heap in the 2 s before the end's first collection
// ended, and peaked at 3,372 and 3,429 MiB RSS; in turn, at 3,174 and
// 3,175 MiB, the whole run 79-80 s against 71 s. One core ends shards
// while the other collects.
func (w *worker) end(seq uint64, turns *endTurns, handOn func(shard int)) {
	w.begin(seq)
	begin := func(s int) {
		if turns != nil && w.groupers[s] != nil {
			turns.wait(s)
		}
	}
	w.tracker.FlushGroups(clientShards, w.sharder.of, begin, func(s int) {
		if g := w.groupers[s]; g != nil {
			g.Flush()
			w.endEvent()
			handOn(s)
			if turns != nil {
				turns.pass(s)
			}
			w.begin(seq)
		}
	})
	w.endEvent()
}

// endTurns hands the end of the input from shard to shard across the
// workers (see worker.end). Every shard belongs to one worker, so each
// turn is taken and passed once.
type endTurns struct {
	mu   sync.Mutex
	cond sync.Cond
	next int // the shard whose turn it is
}

func newEndTurns() *endTurns {
	t := &endTurns{}
	t.cond.L = &t.mu
	return t
}

// wait returns once every shard before s has ended.
func (t *endTurns) wait(s int) {
	t.mu.Lock()
	for t.next < s {
		t.cond.Wait()
	}
	t.mu.Unlock()
}

// pass ends shard s's turn.
func (t *endTurns) pass(s int) {
	t.mu.Lock()
	t.next = s + 1
	t.mu.Unlock()
	t.cond.Broadcast()
}

// nextOwn is the first of this worker's shards after shard, or
// clientShards past its last.
func (w *worker) nextOwn(shard int) int {
	for _, s := range w.own {
		if s > shard {
			return s
		}
	}
	return clientShards
}

// shardOut collects one shard Grouper's output, tagged.
type shardOut struct {
	w     *worker
	shard int
}

func (o *shardOut) add(rec any) {
	o.w.out = append(o.w.out, tagged{seq: o.w.seq, shard: o.shard, rec: rec})
}

func (o *shardOut) Connection(c *reconstruct.Connection)   { o.add(c) }
func (o *shardOut) Transaction(x *reconstruct.Transaction) { o.add(x) }
func (o *shardOut) Pageview(p *pageview.Pageview)          { o.add(p) }

// deliver hands a tagged record to the outputs.
func deliver(next pageview.Sink, t *tagged) {
	switch r := t.rec.(type) {
	case *reconstruct.Connection:
		next.Connection(r)
	case *reconstruct.Transaction:
		next.Transaction(r)
	case *pageview.Pageview:
		next.Pageview(r)
	}
}
