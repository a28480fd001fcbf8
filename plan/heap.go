package plan

// sliceHeap is a container/heap of T in a slice, ordered by less: the
// least item at items[0].
type sliceHeap[T any] struct {
	items []T
	less  func(a, b T) bool
}

func (h *sliceHeap[T]) Len() int           { return len(h.items) }
func (h *sliceHeap[T]) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *sliceHeap[T]) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *sliceHeap[T]) Push(x any)         { h.items = append(h.items, x.(T)) }
func (h *sliceHeap[T]) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
