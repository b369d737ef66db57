package reconstruct

import (
	"hash/maphash"
	"net/netip"
)

// ptrTable is open connections by a key each one holds (key): an
// open-addressing table of pointers (linear probing). A Go map would keep
// the key beside each pointer: for the flow key (36 bytes) about 80 B an
// open connection with its slack, for a client address about 60 B; this
// keeps 8 to 21 B. The seed is random, so that a capture cannot choose
// endpoints that collide.
type ptrTable[K comparable] struct {
	slots []*conn // len a power of two, or 0
	n     int
	seed  maphash.Seed
	key   func(*conn) K
}

// connTable is the open connections by flow key (Tracker.conns).
type connTable = ptrTable[flowKey]

func newConnTable() connTable { return connTable{key: (*conn).key} }

// clientTable is connections by client address (Tracker.byClient1).
type clientTable = ptrTable[netip.Addr]

func newClientTable() clientTable {
	return clientTable{key: func(c *conn) netip.Addr { return c.rec.Client() }}
}

func (t *ptrTable[K]) len() int { return t.n }

func (t *ptrTable[K]) home(k K) int {
	return int(maphash.Comparable(t.seed, k) & uint64(len(t.slots)-1))
}

// get is the connection with key k, nil if none.
func (t *ptrTable[K]) get(k K) *conn {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		c := t.slots[i]
		if c == nil || t.key(c) == k {
			return c
		}
	}
}

// put makes c the connection with key k (t.key(c)), in place of any other.
func (t *ptrTable[K]) put(k K, c *conn) {
	if (t.n+1)*4 > len(t.slots)*3 { // at most 3/4 full: probes stay short
		t.grow()
	}
	mask := len(t.slots) - 1
	i := t.home(k)
	for ; t.slots[i] != nil; i = (i + 1) & mask {
		if t.key(t.slots[i]) == k {
			t.slots[i] = c
			return
		}
	}
	t.slots[i] = c
	t.n++
}

func (t *ptrTable[K]) grow() {
	old := t.slots
	if t.seed == (maphash.Seed{}) {
		t.seed = maphash.MakeSeed()
	}
	t.slots = make([]*conn, max(2*len(old), 8))
	mask := len(t.slots) - 1
	for _, c := range old {
		if c == nil {
			continue
		}
		i := t.home(t.key(c))
		for t.slots[i] != nil {
			i = (i + 1) & mask
		}
		t.slots[i] = c
	}
}

// remove takes c out of the table if it is there under its key. The
// entries after it in its probe run move back into the hole, so that no
// run is broken (no tombstones to sweep).
func (t *ptrTable[K]) remove(c *conn) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(t.key(c))
	for t.slots[i] != c {
		if t.slots[i] == nil {
			return
		}
		i = (i + 1) & mask
	}
	t.n--
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		// The entry at j may fill the hole at i unless its home lies
		// cyclically in (i, j]: then it would sit before its home.
		h := t.home(t.key(t.slots[j]))
		if (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = nil
}
