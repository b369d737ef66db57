package store

import (
	"context"
	"sync"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// streamChunk is how many streamed records are handed to the writer at
// once (at most BatchRows): the writer's lock, its class learning and its
// backpressure then cost once per chunk, not once per record.
const streamChunk = 4096

// stream stages the records streamed through the pageview.Sink methods.
// Per record it costs an append under its own lock, which only the
// flusher's tick contends for: the tick takes what is staged, so a quiet
// capture's last records are stored by age like any others.
type stream struct {
	mu      sync.Mutex
	chunk   int
	b       Batch
	handing bool // a producer is handing a chunk over; the tick waits for it, keeping order
	closed  bool
}

// stage appends one record with add and returns a full chunk to hand over,
// or ok false when the store is closed.
func (s *stream) stage(add func(b *Batch)) (full Batch, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Batch{}, false
	}
	add(&s.b)
	if s.b.Len() < s.chunk {
		return Batch{}, true
	}
	s.handing = true
	return s.takeLocked(), true
}

func (s *stream) takeLocked() Batch {
	b := s.b
	s.b = Batch{}
	return b
}

// handed ends a producer's hand-over.
func (s *stream) handed() {
	s.mu.Lock()
	s.handing = false
	s.mu.Unlock()
}

// take returns what is staged unless a producer is handing a chunk over.
func (s *stream) take() Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handing {
		return Batch{}
	}
	return s.takeLocked()
}

// close refuses further records and returns what is staged.
func (s *stream) close() Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.takeLocked()
}

func (s *stream) staged() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Connection, Transaction and Pageview make the writer a pageview.Sink;
// errors surface from Flush and Close, a record after Close is counted in
// Stats().Rejected.
func (w *writer) Connection(c *reconstruct.Connection) {
	w.streamed(func(b *Batch) { b.Connections = append(b.Connections, c) })
}

func (w *writer) Transaction(t *reconstruct.Transaction) {
	w.streamed(func(b *Batch) { b.Transactions = append(b.Transactions, t) })
}

func (w *writer) Pageview(p *pageview.Pageview) {
	// Queue a copy without Transactions: they are stored as transaction
	// records already, and would otherwise be held, and spilled, twice.
	cp := *p
	cp.Transactions = nil
	w.streamed(func(b *Batch) { b.Pageviews = append(b.Pageviews, &cp) })
}

func (w *writer) streamed(add func(b *Batch)) {
	full, ok := w.stream.stage(add)
	if !ok {
		w.reject(1, "store: record streamed after Close")
		return
	}
	if full.Len() > 0 {
		w.addStreamed(full, true)
		w.stream.handed()
	}
}

// takeStream hands what is staged to the writer without waiting for room:
// it runs on the flusher, which makes the room.
func (w *writer) takeStream() {
	if b := w.stream.take(); b.Len() > 0 {
		w.addStreamed(b, false)
	}
}

// addStreamed queues streamed records; wait says whether to wait for room
// like WriteBatch (a producer) or not (the flusher, Close).
func (w *writer) addStreamed(b Batch, wait bool) {
	if wait {
		if err := w.add(context.Background(), b); err != nil {
			w.reject(b.Len(), err.Error())
		}
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.appendLocked(b)
}

// reject counts records the Sink could not queue (only after Close), so
// that a loss is visible in Stats rather than silent.
func (w *writer) reject(n int, why string) {
	w.mu.Lock()
	w.stats.Rejected += int64(n)
	w.stats.LastError = why
	w.mu.Unlock()
}
