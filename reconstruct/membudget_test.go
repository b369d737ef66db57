package reconstruct_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rtmon/rtmon/capture"
	"github.com/rtmon/rtmon/reconstruct"
)

// TestMemoryBudget: 20,000 client connections, each holding 4 KiB of
// out-of-order request bytes behind a lost segment (a flood with a hole
// per connection), under a 4 MiB budget. The counted state never exceeds
// the budget, the oldest connections are shed first and every shed
// record says so, and the heap the tracker really holds stays near what
// it counts.
func TestMemoryBudget(t *testing.T) {
	const (
		budget = 4 << 20
		conns  = 20_000
		held   = 4 << 10
	)
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	f := newFlow(reconstruct.Config{MaxMemory: budget, IdleTimeout: time.Hour})
	// Count the records instead of keeping them, so the heap measured is
	// the tracker's.
	sink := &flagCounter{}
	f.tr = reconstruct.NewTracker(reconstruct.Config{MaxMemory: budget, IdleTimeout: time.Hour}, sink)
	chunk := make([]byte, 1024)
	var peak int64
	for i := range conns {
		f.cport = uint16(10000 + i%50000)
		f.client = f.client.Next()
		f.handshake()
		// Bytes 1 KiB past the stream's start: the first KiB never came.
		for k := 1; k <= held/len(chunk); k++ {
			f.send(true, capture.FlagACK, f.cNext+uint32(k*len(chunk)), f.sISN+1, chunk)
		}
		f.ts += int64(time.Millisecond)
		if st := f.tr.Stats(); st.MemoryInUse > peak {
			peak = st.MemoryInUse
		}
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	st := f.tr.Stats()
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("counted peak %d B (budget %d), now %d B in %d open connections; live heap +%d B; %d shed",
		peak, budget, st.MemoryInUse, st.OpenConnections, live, st.MemoryEvictions)
	if peak > budget {
		t.Errorf("counted state peaked at %d B, over the %d B budget", peak, budget)
	}
	if st.MemoryEvictions < conns/2 || st.OpenConnections > budget/(reconstruct.ConnectionMemory+held) {
		t.Errorf("%d shed, %d open: want most of %d shed and at most %d open", st.MemoryEvictions, st.OpenConnections,
			conns, budget/(reconstruct.ConnectionMemory+held))
	}
	// What is counted is what is held: the live heap within twice the
	// budget (the records went to a counter).
	if live > 2*budget {
		t.Errorf("live heap +%d B: the tracker holds more than twice what it counts (%d B)", live, budget)
	}
	f.tr.Flush()
	// The first connections went first, flagged; the last ones are whole.
	if sink.first&reconstruct.FlagEvicted == 0 || sink.first&reconstruct.FlagIncomplete == 0 {
		t.Errorf("first connection's flags %v: want evicted and incomplete", sink.first)
	}
	if sink.last&reconstruct.FlagEvicted != 0 {
		t.Errorf("last connection was evicted: the newest state should stay")
	}
	if uint64(sink.evicted) != st.MemoryEvictions || sink.n != conns {
		t.Errorf("%d of %d records flagged evicted, %d evictions counted", sink.evicted, sink.n, st.MemoryEvictions)
	}
	runtime.KeepAlive(f)
}

// flagCounter counts connection records and the evicted ones.
type flagCounter struct {
	n, evicted  int
	first, last reconstruct.Flags
}

func (c *flagCounter) Connection(x *reconstruct.Connection) {
	if c.n == 0 {
		c.first = x.Flags
	}
	c.n++
	c.last = x.Flags
	if x.Flags&reconstruct.FlagEvicted != 0 {
		c.evicted++
	}
}

func (c *flagCounter) Transaction(*reconstruct.Transaction) {}

// TestMillionUnacknowledgedResponses: 1,000,000 responses whose client
// never acknowledges them, over 1,000 connections left open, hold less
// than 300 MiB (issue 13's bound; 766 MiB before responses awaiting an ACK
// were capped per connection) and every one is emitted, flagged no_ack.
func TestMillionUnacknowledgedResponses(t *testing.T) {
	const conns, per = 1000, 1000
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	sink := &noAckCounter{}
	f := newFlow(reconstruct.Config{IdleTimeout: time.Hour})
	f.tr = reconstruct.NewTracker(reconstruct.Config{IdleTimeout: time.Hour}, sink)
	var peak uint64
	for c := range conns {
		f.cport = uint16(20000 + c)
		f.handshake()
		for i := range per {
			f.exchange([]byte("GET /api/"+strconv.Itoa(i)+" HTTP/1.1\r\nHost: x\r\n\r\n"), okResponse, f.sISN+1)
		}
		if c%100 == 99 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc-before.HeapAlloc)
		}
	}
	f.tr.Flush()
	t.Logf("%d responses never acknowledged: live heap peaked at +%d MiB; %d emitted, %d flagged no_ack", conns*per, peak>>20, sink.n, sink.noAck)
	if peak > 300<<20 {
		t.Errorf("live heap +%d MiB, want under 300 MiB", peak>>20)
	}
	if sink.n != conns*per || sink.noAck != conns*per {
		t.Errorf("%d transactions emitted, %d flagged no_ack; want %d of each", sink.n, sink.noAck, conns*per)
	}
}

// noAckCounter counts transactions and those flagged no_ack.
type noAckCounter struct{ n, noAck int }

func (c *noAckCounter) Connection(*reconstruct.Connection) {}
func (c *noAckCounter) Transaction(x *reconstruct.Transaction) {
	c.n++
	if x.Flags&reconstruct.FlagNoAck != 0 {
		c.noAck++
	}
}
