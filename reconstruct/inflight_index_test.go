package reconstruct

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/rtmon/rtmon/capture"
)

// TestClientIndexFollowsTheTable opens connections from a few clients
// into a table so small that evictions end them in an order unrelated to
// the index's, and checks after every packet that the index by client
// holds exactly the open connections, a client's single connection
// apart from the lists of those with more.
func TestClientIndexFollowsTheTable(t *testing.T) {
	tr := NewTracker(Config{MaxConnections: 8}, discardSink{})
	rng := rand.New(rand.NewPCG(1, 2))
	clients := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")}
	srv := netip.MustParseAddr("192.0.2.1")
	for i := range 2000 {
		p := capture.Packet{Timestamp: int64(i+1) * 1e6, SrcIP: clients[rng.IntN(len(clients))], DstIP: srv,
			SrcPort: uint16(40000 + rng.IntN(20)), DstPort: 80, Seq: rng.Uint32(), Flags: capture.FlagSYN, WindowScale: -1}
		tr.Packet(&p)
		n := 0
		for _, c := range tr.byClient1.slots {
			if c == nil {
				continue
			}
			addr := c.rec.Client()
			n++
			if tr.byClient1.get(addr) != c || c.byClientPos != 0 || tr.conns.get(c.key()) != c || tr.byClient[addr] != nil {
				t.Fatalf("packet %d: single index entry %s out of step with the table", i, addr)
			}
		}
		for addr, list := range tr.byClient {
			if len(list) < 2 {
				t.Fatalf("packet %d: %s has %d connections in the multiple index", i, addr, len(list))
			}
			for pos, c := range list {
				n++
				if c.rec.Client() != addr || int(c.byClientPos) != pos || tr.conns.get(c.key()) != c {
					t.Fatalf("packet %d: index entry %s #%d out of step with the table", i, addr, pos)
				}
			}
		}
		if n != tr.conns.len() {
			t.Fatalf("packet %d: %d connections indexed, %d open", i, n, tr.conns.len())
		}
	}
	tr.Flush()
	if len(tr.byClient)+tr.byClient1.len() != 0 {
		t.Errorf("%d clients still indexed after Flush", len(tr.byClient)+tr.byClient1.len())
	}
}

type discardSink struct{}

func (discardSink) Connection(*Connection)   {}
func (discardSink) Transaction(*Transaction) {}
