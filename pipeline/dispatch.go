package pipeline

import (
	"math"
	"sync"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// tickEvery is the capture time between clock ticks: the trackers sweep
// idle connections once a second of capture time (reconstruct.Tracker's
// own pace), and the Groupers of quiet shards move on with them.
const tickEvery = int64(time.Second)

// Batch bounds for handing packets to a worker: large enough that the
// channel costs nothing per packet, small enough to keep the workers busy
// together and the records flowing.
const (
	batchEvents = 512
	batchBytes  = 512 << 10
	batchDepth  = 4 // batches in flight per worker
)

// shards feeds the input to the workers and their records, merged in one
// order (see tagged), to the outputs. With one worker it all runs on the
// caller's goroutine; with more, each worker has its own, and a merger
// goroutine feeds the outputs.
type shards struct {
	workers []*worker
	sharder *sharder
	next    pageview.Sink

	seq      uint64 // the last event numbered
	now      int64  // the latest capture time seen
	nextTick int64
	ended    bool

	// More than one worker only:
	in      []chan *inBatch
	free    []chan *inBatch
	cur     []*inBatch
	out     chan outBatch
	merged  chan struct{}
	running sync.WaitGroup
	statsMu sync.Mutex
	stats   []reconstruct.Stats // each worker's, after its last batch
	turns   *endTurns           // the workers end the input a shard at a time
}

// Event kinds in a batch.
const (
	evPacket = iota
	evTick
	evEnd
)

type event struct {
	kind   uint8
	seq    uint64
	now    int64
	p      capture.Packet // Payload is nil: off and n locate it in the batch's buf
	off, n int
}

type inBatch struct {
	events []event
	buf    []byte
	upTo   uint64 // every event up to this one was dispatched before the batch was sent
}

type outBatch struct {
	worker int
	recs   []tagged
	done   position // the worker will emit nothing that sorts before this
}

// position is a place in the records' order, (event, shard): a bound
// below which a worker has emitted all it will.
type position struct {
	seq   uint64
	shard int
}

func (a position) before(b position) bool {
	return a.seq < b.seq || (a.seq == b.seq && a.shard < b.shard)
}

// after is the position just past every record of events up to seq.
func after(seq uint64) position { return position{seq: seq + 1} }

func newShards(n int, mk func(index, n int) *worker, next pageview.Sink) *shards {
	s := &shards{next: next}
	for i := range n {
		s.workers = append(s.workers, mk(i, n))
	}
	s.sharder = s.workers[0].sharder
	if n > 1 {
		s.startParallel()
	}
	return s
}

// packet dispatches one packet (its Payload is copied if kept).
func (s *shards) packet(p *capture.Packet) {
	s.seq++
	s.now = max(s.now, p.Timestamp)
	if s.now >= s.nextTick {
		s.tick()
		s.seq++
	}
	if len(s.workers) == 1 {
		s.workers[0].packet(s.seq, s.now, p)
		s.deliverInline()
		return
	}
	b := s.cur[s.sharder.packet(p)%len(s.workers)]
	// Filled in place: an event is 216 bytes, mostly the decoded packet,
	// and the reader writes one for every packet.
	b.events = append(b.events, event{})
	ev := &b.events[len(b.events)-1]
	ev.kind, ev.seq, ev.now, ev.off, ev.n = evPacket, s.seq, s.now, len(b.buf), len(p.Payload)
	ev.p = *p
	ev.p.Payload = nil
	b.buf = append(b.buf, p.Payload...)
	if len(b.events) >= batchEvents || len(b.buf) >= batchBytes {
		s.sync()
	}
}

// tick numbers a clock tick for every worker, at event s.seq.
func (s *shards) tick() {
	s.nextTick = s.now + tickEvery
	if len(s.workers) == 1 {
		s.workers[0].tick(s.seq, s.now)
		s.deliverInline()
		return
	}
	for _, b := range s.cur {
		b.events = append(b.events, event{kind: evTick, seq: s.seq, now: s.now})
	}
}

func (s *shards) deliverInline() {
	w := s.workers[0]
	for i := range w.out {
		deliver(s.next, &w.out[i])
		w.out[i].rec = nil
	}
	w.out = w.out[:0]
}

// finish ends the input: every tracker and Grouper is flushed and every
// record has reached the outputs when it returns.
func (s *shards) finish() {
	if s.ended {
		return
	}
	s.ended = true
	s.seq++
	if len(s.workers) == 1 {
		s.workers[0].end(s.seq, nil, func(int) { s.deliverInline() })
		s.deliverInline()
		return
	}
	for i, b := range s.cur {
		b.events = append(b.events, event{kind: evEnd, seq: s.seq})
		b.upTo = s.seq
		s.in[i] <- b
		close(s.in[i])
	}
	<-s.merged
}

// trackerStats sums the trackers' counters: live after each batch of a
// worker, final after finish.
func (s *shards) trackerStats() reconstruct.Stats {
	var sum reconstruct.Stats
	if len(s.workers) == 1 || s.ended {
		for _, w := range s.workers {
			sum.Add(w.tracker.Stats())
		}
		return sum
	}
	s.statsMu.Lock()
	for _, st := range s.stats {
		sum.Add(st)
	}
	s.statsMu.Unlock()
	return sum
}

func (s *shards) startParallel() {
	n := len(s.workers)
	s.in, s.free, s.cur = make([]chan *inBatch, n), make([]chan *inBatch, n), make([]*inBatch, n)
	s.stats = make([]reconstruct.Stats, n)
	s.out = make(chan outBatch, n*batchDepth)
	s.merged = make(chan struct{})
	s.turns = newEndTurns()
	for i := range n {
		s.in[i] = make(chan *inBatch, batchDepth+1) // room for all of them: see sync
		s.free[i] = make(chan *inBatch, batchDepth+1)
		for range batchDepth {
			s.free[i] <- &inBatch{events: make([]event, 0, batchEvents+2), buf: make([]byte, 0, batchBytes+64<<10)}
		}
		s.cur[i] = &inBatch{events: make([]event, 0, batchEvents+2), buf: make([]byte, 0, batchBytes+64<<10)}
		s.running.Add(1)
		go s.runWorker(i)
	}
	go func() {
		s.running.Wait()
		close(s.out)
	}()
	go s.merge()
}

// sync hands every worker its batch, empty ones too (they carry the
// progress the merger waits for), and takes fresh ones. A live source
// calls it before it would wait for packets, so records are not held back.
//
// Every worker has its batch before the reader waits for any to be done
// with one: waiting on a busy worker before handing the next one its
// batch left that one idle (traces at 2 workers: 2-4% of the run).
// Handing them out never waits: a worker's queue has room for all its
// batches.
func (s *shards) sync() {
	if len(s.workers) == 1 || s.ended {
		return
	}
	for i, b := range s.cur {
		b.upTo = s.seq
		s.in[i] <- b
	}
	for i := range s.cur {
		s.cur[i] = <-s.free[i]
	}
}

func (s *shards) runWorker(i int) {
	defer s.running.Done()
	w := s.workers[i]
	for b := range s.in[i] {
		for j := range b.events {
			ev := &b.events[j]
			switch ev.kind {
			case evPacket:
				// The tracker reads the packet where it is: it keeps
				// nothing of it past the call.
				ev.p.Payload = b.buf[ev.off : ev.off+ev.n : ev.off+ev.n]
				w.packet(ev.seq, ev.now, &ev.p)
			case evTick:
				w.tick(ev.seq, ev.now)
			case evEnd:
				// The end comes out a shard at a time (see worker.end):
				// past a shard, this worker emits nothing before its next.
				seq := ev.seq
				w.end(seq, s.turns, func(shard int) {
					s.out <- outBatch{worker: i, recs: w.out, done: position{seq, w.nextOwn(shard)}}
					w.out = nil
				})
			}
		}
		done := after(b.upTo)
		b.events, b.buf = b.events[:0], b.buf[:0]
		s.free[i] <- b
		st := w.tracker.Stats()
		s.statsMu.Lock()
		s.stats[i] = st
		s.statsMu.Unlock()
		s.out <- outBatch{worker: i, recs: w.out, done: done}
		w.out = nil
	}
}

// merge feeds the outputs in (event, shard) order: a record goes out once
// every worker has processed its event, so no worker can still emit one
// that sorts before it.
func (s *shards) merge() {
	defer close(s.merged)
	n := len(s.workers)
	queues := make([][]tagged, n)
	heads := make([]int, n)
	done := make([]position, n)
	release := func(limit position) {
		for {
			best := -1
			for i := range n {
				if heads[i] < len(queues[i]) && queues[i][heads[i]].pos().before(limit) &&
					(best < 0 || queues[i][heads[i]].before(&queues[best][heads[best]])) {
					best = i
				}
			}
			if best < 0 {
				return
			}
			t := &queues[best][heads[best]]
			deliver(s.next, t)
			t.rec = nil
			heads[best]++
		}
	}
	for ob := range s.out {
		i := ob.worker
		if heads[i] == len(queues[i]) {
			queues[i], heads[i] = queues[i][:0], 0
		} else if heads[i] > len(queues[i])/2 {
			queues[i] = queues[i][:copy(queues[i], queues[i][heads[i]:])]
			heads[i] = 0
		}
		queues[i] = append(queues[i], ob.recs...)
		done[i] = ob.done
		release(minOf(done))
	}
	release(position{math.MaxUint64, math.MaxInt})
}

func minOf(v []position) position {
	m := v[0]
	for _, x := range v[1:] {
		if x.before(m) {
			m = x
		}
	}
	return m
}
