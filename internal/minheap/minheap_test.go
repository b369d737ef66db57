package minheap

import (
	"math/rand/v2"
	"testing"
)

type stamped struct{ t, seq int }

func (a stamped) Before(b stamped) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	return a.seq < b.seq
}

// Elements leave in Before order whatever order they came in, ties by
// their own tie-break, with Fix and Init keeping the order.
func TestHeapOrders(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h Heap[stamped]
	for i := range 1000 {
		h.Push(stamped{r.IntN(50), i})
	}
	h[0].t = 100 // the first one out is now due last
	h.Fix(0)
	var got []stamped
	for len(h) > 0 {
		got = append(got, h.Pop())
	}
	for i := 1; i < len(got); i++ {
		if got[i].Before(got[i-1]) {
			t.Fatalf("popped %+v after %+v", got[i], got[i-1])
		}
	}
	if len(got) != 1000 || got[len(got)-1].t != 100 {
		t.Fatalf("%d popped, last %+v: want 1000, the fixed element last", len(got), got[len(got)-1])
	}
	h = Heap[stamped]{{3, 0}, {1, 1}, {2, 2}}
	h.Init()
	if a, b, c := h.Pop(), h.Pop(), h.Pop(); a.t != 1 || b.t != 2 || c.t != 3 {
		t.Fatalf("after Init: %v %v %v", a, b, c)
	}
}
