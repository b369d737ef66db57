package reconstruct

import "hash/maphash"

// connTable is the open connections by flow key: an open-addressing table
// of pointers (linear probing) that reads each one's key from the
// connection itself (conn.key). A Go map would keep a 36-byte key beside
// each pointer, about 80 B an open connection with its slack; this keeps
// 8 to 16 B. The seed is random, so that a capture cannot choose endpoints
// that collide.
type connTable struct {
	slots []*conn // len a power of two, or 0
	n     int
	seed  maphash.Seed
}

func (t *connTable) len() int { return t.n }

func (t *connTable) home(k flowKey) int {
	return int(maphash.Comparable(t.seed, k) & uint64(len(t.slots)-1))
}

// get is the connection with key k, nil if none.
func (t *connTable) get(k flowKey) *conn {
	if t.n == 0 {
		return nil
	}
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		c := t.slots[i]
		if c == nil || c.key() == k {
			return c
		}
	}
}

// put makes c the connection with key k (c.key()), in place of any other.
func (t *connTable) put(k flowKey, c *conn) {
	if (t.n+1)*4 > len(t.slots)*3 { // at most 3/4 full: probes stay short
		t.grow()
	}
	mask := len(t.slots) - 1
	i := t.home(k)
	for ; t.slots[i] != nil; i = (i + 1) & mask {
		if t.slots[i].key() == k {
			t.slots[i] = c
			return
		}
	}
	t.slots[i] = c
	t.n++
}

func (t *connTable) grow() {
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
		i := t.home(c.key())
		for t.slots[i] != nil {
			i = (i + 1) & mask
		}
		t.slots[i] = c
	}
}

// remove takes c out of the table if it is there under its key. The
// entries after it in its probe run move back into the hole, so that no
// run is broken (no tombstones to sweep).
func (t *connTable) remove(c *conn) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(c.key())
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
		h := t.home(t.slots[j].key())
		if (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = nil
}
