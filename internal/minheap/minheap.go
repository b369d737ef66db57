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

// Push adds x.
func (h *Heap[T]) Push(x T) { heap.Push((*adapter[T])(h), x) }

// Pop removes and returns the first element. The heap must not be empty.
func (h *Heap[T]) Pop() T { return heap.Pop((*adapter[T])(h)).(T) }

// Init orders a heap whose elements were set directly.
func (h *Heap[T]) Init() { heap.Init((*adapter[T])(h)) }

// Fix restores the order after the element at i changed.
func (h *Heap[T]) Fix(i int) { heap.Fix((*adapter[T])(h), i) }

// adapter is the heap.Interface view of a Heap.
type adapter[T Ordered[T]] []T

func (a adapter[T]) Len() int           { return len(a) }
func (a adapter[T]) Less(i, j int) bool { return a[i].Before(a[j]) }
func (a adapter[T]) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a *adapter[T]) Push(x any)        { *a = append(*a, x.(T)) }
func (a *adapter[T]) Pop() any {
	old := *a
	n := len(old) - 1
	x := old[n]
	var zero T
	old[n] = zero // the slot keeps nothing reachable
	*a = old[:n]
	return x
}
