package reconstruct_test

import (
	"runtime"
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
