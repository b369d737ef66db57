// Package minheap is a binary min-heap of values that order themselves.
// It is container/heap with the adapter written once: the grouper's held
// transactions, the what-if replay's events, the synthetic workload's
// clients and the testbed link's frames are all time-ordered queues.
package minheap

import "container/heap"

// Ordered is implemented by heap elements: a.Before(b) when a must leave
// the heap first.
type Ordered[T any] interface{ Before(T) bool }

// Heap is a min-heap by Before. The zero value is an empty heap; h[0] is
// the first element out.
type Heap[T Ordered[T]] []T

// Push adds x. It appends and lets heap.Fix sift, as heap.Push would,
// without passing x through heap.Interface's any: boxing a struct
// element allocated it on every push and pop (the grouper's held
// transactions took 240 B of garbage a connection at the end of a
// capture, the what-if replay one allocation per event).
func (h *Heap[T]) Push(x T) {
	*h = append(*h, x)
	heap.Fix((*adapter[T])(h), len(*h)-1)
}

// Pop removes and returns the first element. The heap must not be empty.
// The same swaps as heap.Pop: the last element to the top, then down.
func (h *Heap[T]) Pop() T {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], old[0]
	x := old[n]
	var zero T
	old[n] = zero // the slot keeps nothing reachable
	*h = old[:n]
	if n > 0 {
		heap.Fix((*adapter[T])(h), 0)
	}
	return x
}

// Init orders a heap whose elements were set directly.
func (h *Heap[T]) Init() { heap.Init((*adapter[T])(h)) }

// Fix restores the order after the element at i changed.
func (h *Heap[T]) Fix(i int) { heap.Fix((*adapter[T])(h), i) }

// adapter is the heap.Interface view of a Heap.
type adapter[T Ordered[T]] []T

func (a adapter[T]) Len() int           { return len(a) }
func (a adapter[T]) Less(i, j int) bool { return a[i].Before(a[j]) }
func (a adapter[T]) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }

// Push and Pop complete heap.Interface for Init and Fix, which never call
// them: Heap's own Push and Pop do their work without boxing.
func (a *adapter[T]) Push(x any) { *a = append(*a, x.(T)) }
func (a *adapter[T]) Pop() any {
	old := *a
	n := len(old) - 1
	x := old[n]
	var zero T
	old[n] = zero
	*a = old[:n]
	return x
}
