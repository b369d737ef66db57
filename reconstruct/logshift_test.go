package reconstruct

import (
	"math/rand/v2"
	"testing"
)

// ringProbes is serverLog's probes as a ring with a head and a count, as it was
// before the shift: the reference the shift must answer exactly as.
type ringProbes struct {
	ring [3]struct{ end, ts int64 }
	held struct{ end, ts int64 }
	head uint8
	n    uint8
}

func (r *ringProbes) sent(end, ts int64) {
	r.ring[r.head].end, r.ring[r.head].ts = end, ts
	r.head = (r.head + 1) % uint8(len(r.ring))
	if int(r.n) < len(r.ring) {
		r.n++
	}
	if r.held.ts == 0 {
		r.held.end, r.held.ts = end, ts
	}
}

func (r *ringProbes) acked(off int64) (int64, bool) {
	held := r.held
	if held.ts != 0 && held.end <= off {
		r.held.ts = 0
	}
	for i := range int(r.n) {
		slot := (int(r.head) - 1 - i + len(r.ring)) % len(r.ring)
		if r.ring[slot].end <= off {
			ts := r.ring[slot].ts
			r.n = uint8(i)
			return ts, true
		}
	}
	if held.ts != 0 && held.end <= off {
		return held.ts, true
	}
	return 0, false
}

func (r *ringProbes) reset() { r.n, r.held.ts = 0, 0 }

// TestProbesShiftMatchesRing drives serverLog's probes and the ring it replaced
// with the same random segments, ACKs and resets, offsets negative too.
func TestProbesShiftMatchesRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for run := range 200 {
		var got serverLog
		var want ringProbes
		off := rng.Int64N(2000) - 1000
		for i := range 300 {
			switch k := rng.IntN(10); {
			case k < 5:
				off += rng.Int64N(1500)
				ts := rng.Int64N(1e9) // 0 included: a send at time 0 is a probe too
				got.add(off, off, ts)
				want.sent(off, ts)
			case k < 9:
				ack := off - rng.Int64N(4000)
				gts, gok := got.acked(ack)
				wts, wok := want.acked(ack)
				if gts != wts || gok != wok {
					t.Fatalf("run %d step %d: acked(%d) = %d %v, ring %d %v", run, i, ack, gts, gok, wts, wok)
				}
			default:
				got.resetProbes()
				want.reset()
			}
		}
	}
}

// TestDeliveryLogShift checks the two-piece logs find the newer piece
// first and forget the third-newest, as the rings they replaced did, and
// that a piece's loss evidence shifts with it.
func TestDeliveryLogShift(t *testing.T) {
	var l deliveryLog
	var d deliveryLoss
	var s serverLog
	if _, ok := l.piece(0, &d); ok || s.last() != 0 || s.timeAt(0, -1) != -1 {
		t.Fatal("an empty log holds a piece")
	}
	for i := range int64(3) {
		p := deliveryPiece{off: i * 10, end: i*10 + 20, ts: 100 + i, arrived: 50 + i, lost: int8(i), refill: i == 1}
		l.add(p)
		d.add(p)
		s.add(i*10, i*10+20, 100+i)
	}
	if p, ok := l.piece(25, &d); !ok || p.ts != 102 || p.arrived != 52 || p.lost != 2 || p.refill {
		t.Errorf("piece(25) = %+v %v, want the newest", p, ok)
	}
	if p, ok := l.piece(15, &d); !ok || p.ts != 101 || !p.refill || p.lost != 1 || p.arrived != 51 {
		t.Errorf("piece(15) = %+v %v, want the older", p, ok)
	}
	if p, ok := l.piece(15, nil); !ok || p.ts != 101 || p.arrived != 101 || p.refill || p.lost != 0 {
		t.Errorf("piece(15) without loss evidence = %+v %v, want it as it came in order", p, ok)
	}
	if _, ok := l.piece(5, &d); ok {
		t.Error("the third-newest piece is still remembered")
	}
	if s.timeAt(25, -1) != 102 || s.timeAt(15, -1) != 101 || s.timeAt(5, -1) != -1 || s.last() != 102 {
		t.Error("serverLog does not match its pieces")
	}
}

// TestClientPieceLossEvidence checks that a connection keeps its pieces'
// loss evidence apart (in lossNotes) only once some came, and that the
// evidence stays with its piece as later pieces shift in.
func TestClientPieceLossEvidence(t *testing.T) {
	c := &conn{flowState: &flowState{}}
	c.addClientPiece(deliveryPiece{off: 0, end: 10, ts: 100, arrived: 100})
	if c.loss != nil {
		t.Fatal("a piece that came in order made loss notes")
	}
	c.addClientPiece(deliveryPiece{off: 10, end: 20, ts: 200, arrived: 150, lost: 1, refill: true})
	if c.loss == nil {
		t.Fatal("a refill left no loss evidence")
	}
	if p, ok := c.clientPiece(5); !ok || p.arrived != 100 || p.lost != 0 || p.refill {
		t.Errorf("piece(5) = %+v %v, want it as it came in order", p, ok)
	}
	c.addClientPiece(deliveryPiece{off: 20, end: 30, ts: 300, arrived: 300})
	if p, ok := c.clientPiece(15); !ok || p.ts != 200 || p.arrived != 150 || p.lost != 1 || !p.refill {
		t.Errorf("piece(15) = %+v %v, want the refill's evidence", p, ok)
	}
	if p, ok := c.clientPiece(25); !ok || p.arrived != 300 || p.lost != 0 || p.refill {
		t.Errorf("piece(25) = %+v %v, want it as it came in order", p, ok)
	}
	if ts, lost, _ := c.clientTimeAt(15, -1); ts != 200 || lost != 1 {
		t.Errorf("clientTimeAt(15) = %d, %d lost; want 200, 1", ts, lost)
	}
	if ts, _, _ := c.clientTimeAt(5, -1); ts != -1 {
		t.Errorf("clientTimeAt(5) = %d, want the fallback for a piece forgotten", ts)
	}
}
