package minheap

import (
	"container/heap"
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

// tied orders by t alone, so that ties show which element the heap's swaps
// bring out first.
type tied struct{ t, id int }

func (a tied) Before(b tied) bool { return a.t < b.t }

type stdHeap []tied

func (h stdHeap) Len() int           { return len(h) }
func (h stdHeap) Less(i, j int) bool { return h[i].t < h[j].t }
func (h stdHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *stdHeap) Push(x any)        { *h = append(*h, x.(tied)) }
func (h *stdHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Push and Pop make the swaps container/heap's do: among tied elements the
// same one leaves first, so what a replay or a grouper emits does not
// change with the implementation.
func TestHeapMatchesContainerHeap(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var h Heap[tied]
	var std stdHeap
	for i := range 5000 {
		if len(h) > 0 && r.IntN(3) == 0 {
			a, b := h.Pop(), heap.Pop(&std).(tied)
			if a != b {
				t.Fatalf("step %d: popped %+v, container/heap %+v", i, a, b)
			}
			continue
		}
		x := tied{r.IntN(20), i}
		h.Push(x)
		heap.Push(&std, x)
	}
	for len(h) > 0 {
		if a, b := h.Pop(), heap.Pop(&std).(tied); a != b {
			t.Fatalf("draining: popped %+v, container/heap %+v", a, b)
		}
	}
}

// A push and a pop of a struct element allocate nothing once the slice has
// room.
func TestHeapPushPopDoNotAllocate(t *testing.T) {
	h := make(Heap[stamped], 0, 64)
	for i := range 32 {
		h.Push(stamped{i % 7, i})
	}
	n := 0
	allocs := testing.AllocsPerRun(1000, func() {
		n++
		h.Push(stamped{n % 11, n})
		h.Pop()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per push and pop, want 0", allocs)
	}
}
