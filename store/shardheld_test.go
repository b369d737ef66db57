package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/reconstruct"
)

// fakeShards is a two-shard cluster in memory: a client's shard is the
// low bit of its address's last byte; a shard that is down fails every
// store, as a cluster's unreachable shard does.
type fakeShards struct {
	mu     sync.Mutex
	down   map[int]bool
	stored []map[string]int // per shard: id -> times stored
}

func newFakeShards() *fakeShards {
	return &fakeShards{down: map[int]bool{}, stored: []map[string]int{{}, {}}}
}

func (f *fakeShards) shardCount() int { return 2 }

func (f *fakeShards) shardOf(client netip.Addr) int { return int(client.As16()[15] & 1) }

func (f *fakeShards) storeShard(_ context.Context, s int, groups []recordGroup, items [][]recordItem) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[s] {
		return 0, fmt.Errorf("shard %d: connection refused", s+1)
	}
	dups := 0
	for gi, g := range groups {
		for _, it := range items[gi] {
			if f.shardOf(g.client(it.i)) != s {
				return 0, fmt.Errorf("record %s of shard %d sent to shard %d", it.id, f.shardOf(g.client(it.i))+1, s+1)
			}
			key := g.t.name + "/" + it.id
			if f.stored[s][key] > 0 {
				dups++
				continue
			}
			f.stored[s][key]++
		}
	}
	return dups, nil
}

func (f *fakeShards) close() error { return nil }

func (f *fakeShards) setDown(s int, down bool) {
	f.mu.Lock()
	f.down[s] = down
	f.mu.Unlock()
}

// count is how many transactions shard s holds.
func (f *fakeShards) count(s int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.stored[s])
}

// checkOnce: every transaction of 0..n-1 is stored exactly once, on its
// client's shard.
func (f *fakeShards) checkOnce(t *testing.T, n int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range n {
		key := txTable.name + "/" + fmt.Sprintf("c-%d", i)
		s := f.shardOf(shardClient(i))
		if f.stored[s][key] != 1 || f.stored[1-s][key] != 0 {
			t.Fatalf("transaction %d: stored %d times on its shard %d, %d on the other", i, f.stored[s][key], s+1, f.stored[1-s][key])
		}
	}
	if got := len(f.stored[0]) + len(f.stored[1]); got != n {
		t.Fatalf("%d transactions stored, want %d", got, n)
	}
}

func shardClient(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}) }

// shardBatch is n transactions from i = from on, their clients on both
// shards in turn.
func shardBatch(from, n int) Batch {
	var b Batch
	for i := from; i < from+n; i++ {
		b.Transactions = append(b.Transactions, &reconstruct.Transaction{ID: fmt.Sprintf("c-%d", i), ConnectionID: "c",
			Client: shardClient(i), Index: i, Start: 1e18 + int64(i)*1e6, End: 1e18 + int64(i)*1e6 + 1e5, Total: 1e5, Tserver: 1e5})
	}
	return b
}

// openSharded opens an in-memory store whose writer stores into f.
func openSharded(t *testing.T, f *fakeShards, o Options) Store {
	t.Helper()
	o.Rollups = "off"
	if o.MaxBackoff == 0 {
		o.MaxBackoff = 50 * time.Millisecond
	}
	if o.CloseTimeout == 0 {
		o.CloseTimeout = 300 * time.Millisecond
	}
	o.shards = f
	st, err := Open(context.Background(), "memory:", o)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// One shard down: the other keeps taking its records while the down
// shard's wait, in order; when it is back they are stored, each once.
func TestShardedWriterHoldsADownShard(t *testing.T) {
	f := newFakeShards()
	f.setDown(1, true)
	st := openSharded(t, f, Options{MaxAge: 20 * time.Millisecond})
	defer st.Close()
	for i := range 10 {
		if err := st.WriteBatch(context.Background(), shardBatch(i*100, 100)); err != nil {
			t.Fatal(err)
		}
		if err := st.Flush(ctxShort(t)); err == nil || !strings.Contains(err.Error(), "held for shards [2]") {
			t.Fatalf("flush with shard 2 down = %v, want the held records named", err)
		}
		if got := f.count(0); got != (i+1)*50 {
			t.Fatalf("after batch %d, shard 1 holds %d transactions, want %d: it must not wait for shard 2", i, got, (i+1)*50)
		}
	}
	s := st.Stats()
	if !slices.Equal(s.HeldShards, []int{2}) || s.HeldRecords != 500 || s.Written != 500 || s.Queued != 500 || !s.Failing ||
		!strings.Contains(s.LastError, "shard 2") {
		t.Fatalf("stats with shard 2 down: %+v", s)
	}
	f.setDown(1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.Flush(ctx); err != nil {
		t.Fatalf("flush with shard 2 back: %v", err)
	}
	f.checkOnce(t, 1000)
	if s := st.Stats(); len(s.HeldShards) != 0 || s.HeldRecords != 0 || s.Written != 1000 || s.Queued != 0 || s.Failing || s.LostRecords != 0 {
		t.Fatalf("stats with shard 2 back: %+v", s)
	}
}

// Past the memory bound the held records spill; closed during the outage
// the store says what it left, and the next Open stores it on the right
// shard, each record once.
func TestShardedWriterSpillsHeldRecords(t *testing.T) {
	f := newFakeShards()
	f.setDown(1, true)
	dir := t.TempDir()
	st := openSharded(t, f, Options{MaxAge: 20 * time.Millisecond, SpillDir: dir, MaxBufferRows: 100, BatchRows: 100})
	for i := range 20 {
		if err := st.WriteBatch(context.Background(), shardBatch(i*100, 100)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "shard 1 stored its 1000 and the held records spilled", func() bool {
		s := st.Stats()
		return f.count(0) == 1000 && s.SpilledFiles > 0 && s.HeldRecords == 1000
	})
	err := st.Close()
	if err == nil || !strings.Contains(err.Error(), "the next Open replays them") || strings.Contains(err.Error(), "LOST") {
		t.Fatalf("close with shard 2 down = %v, want its records left in spill files", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "seg-*.gob"))
	if len(files) == 0 {
		t.Fatal("no spill files left")
	}
	f.setDown(1, false)
	st2 := openSharded(t, f, Options{MaxAge: 20 * time.Millisecond, SpillDir: dir})
	defer st2.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st2.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.checkOnce(t, 2000)
	if left, _ := filepath.Glob(filepath.Join(dir, "seg-*.gob")); len(left) != 0 {
		t.Errorf("spill files left after the replay: %v", left)
	}
}

// Every shard with rows failing is no progress: the batch stays at the
// queue's head, nothing is held, and it is stored once they are back.
func TestShardedWriterAllShardsDown(t *testing.T) {
	f := newFakeShards()
	f.setDown(0, true)
	f.setDown(1, true)
	st := openSharded(t, f, Options{MaxAge: 20 * time.Millisecond})
	defer st.Close()
	if err := st.WriteBatch(context.Background(), shardBatch(0, 100)); err != nil {
		t.Fatal(err)
	}
	if err := st.Flush(ctxShort(t)); err == nil {
		t.Fatal("flush with every shard down succeeded")
	}
	if s := st.Stats(); len(s.HeldShards) != 0 || !s.Failing || s.Queued != 100 || s.Written != 0 {
		t.Fatalf("stats with every shard down: %+v", s)
	}
	var sf *shardFailure
	if w := st.(*engine).writer; !errors.As(w.err, &sf) || sf.progress() {
		t.Errorf("writer error %v: want a shard failure without progress", w.err)
	}
	f.setDown(0, false)
	f.setDown(1, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	f.checkOnce(t, 100)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
