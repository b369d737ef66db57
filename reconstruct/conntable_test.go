package reconstruct

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rtmon/rtmon/capture"
)

// TestConnTable holds connTable to what a Go map keyed by conn.key would
// do through random opens and closes, with few distinct keys so that probe
// runs collide, wrap and lose entries from their middles.
func TestConnTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newConnTable()
	want := map[flowKey]*conn{}
	srv := netip.AddrFrom4([4]byte{192, 0, 2, 1})
	for i := range 200_000 {
		c := &conn{}
		cli := netip.AddrFrom4([4]byte{10, 0, 0, byte(rng.IntN(4))})
		c.rec.client, c.rec.clientKind = packAddr(cli)
		c.rec.server, c.rec.serverKind = packAddr(srv)
		c.rec.ClientPort, c.rec.ServerPort = uint16(40000+rng.IntN(300)), 80
		k := c.key()
		if old := want[k]; old != nil && rng.IntN(2) == 0 {
			tab.remove(old)
			delete(want, k)
		} else {
			tab.put(k, c)
			want[k] = c
		}
		if tab.len() != len(want) {
			t.Fatalf("step %d: %d in the table, want %d", i, tab.len(), len(want))
		}
		if i%1000 == 0 {
			for k, c := range want {
				if got := tab.get(k); got != c {
					t.Fatalf("step %d: get(%v) = %p, want %p", i, k, got, c)
				}
			}
		}
	}
	n := 0
	for _, c := range tab.slots {
		if c != nil {
			n++
			if want[c.key()] != c {
				t.Fatalf("a connection left in the table that was removed")
			}
		}
	}
	if n != len(want) {
		t.Fatalf("%d in the slots, want %d", n, len(want))
	}
}

// TestConnKey holds conn.key, which connTable reads instead of a stored
// key, to the key of the packets that opened the connection, whichever
// side sent first and however the endpoints sort.
func TestConnKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	addrs := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"),
		netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("2001:db8::1"), {}}
	tr := NewTracker(Config{}, nil)
	for range 20_000 {
		p := capture.Packet{SrcIP: addrs[rng.IntN(len(addrs))], DstIP: addrs[rng.IntN(len(addrs))],
			SrcPort: uint16(79 + rng.IntN(3)), DstPort: uint16(79 + rng.IntN(3)), Flags: uint8(rng.IntN(64))}
		want, _ := makeKey(&p)
		if got := newConn(tr, &p).key(); got != want {
			t.Fatalf("%v:%d -> %v:%d flags %#x: key %v, want %v", p.SrcIP, p.SrcPort, p.DstIP, p.DstPort, p.Flags, got, want)
		}
	}
}
