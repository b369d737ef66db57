package store

import (
	"cmp"
	"container/heap"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/rtmon/rtmon/store/query"
)

// Sample reads the component columns of sq's records in one pass and keeps,
// per class, the Max with the smallest query.SampleKey of their id: a
// bottom-k sample, so memory is bounded by Max per class whatever the
// range holds, and the choice does not depend on the order rows arrive in
// (neither engine promises one without a sort, which would cost more
// than the pass).
func (q *querier) Sample(ctx context.Context, sq query.SampleQuery) ([]query.ClassSample, error) {
	k, t, err := kindTable(sq.Kind)
	if err != nil {
		return nil, err
	}
	comps := sq.Components
	if len(comps) == 0 {
		comps = slices.DeleteFunc(Components(k), func(c string) bool { return c == "rtt" })
	}
	cols := make([]string, len(comps))
	for i, c := range comps {
		if cols[i], err = componentCol(k, c); err != nil {
			return nil, fmt.Errorf("sample: %w", err)
		}
	}
	maxN := sq.Max
	if maxN <= 0 {
		maxN = 5000
	}
	maxN = min(maxN, query.SampleMax)
	w := baseWhere(sq.Range, sq.Class)
	if sq.Sensor != "" {
		w.add("sensor = ?", sq.Sensor)
	}
	sqlText := fmt.Sprintf("SELECT class, id, %s FROM %s WHERE %s", strings.Join(cols, ", "), q.d.table(t.name), w)
	byClass := map[string]*sampleHeap{}
	var order []string
	vals := make([]int64, len(cols))
	dest := make([]any, 0, len(cols)+2)
	var class, id string
	dest = append(dest, &class, &id)
	for i := range vals {
		dest = append(dest, &vals[i])
	}
	err = eachRow(ctx, q.db(), sqlText, w.args, func(rows *sql.Rows) error {
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		h := byClass[class]
		if h == nil {
			if len(byClass) >= query.SampleMaxClasses {
				return nil // past the bound: further classes are left out
			}
			h = &sampleHeap{}
			byClass[class] = h
			order = append(order, class)
		}
		h.n++
		h.offer(sampled{key: query.SampleKey(sq.Seed, id), vals: slices.Clone(vals)}, maxN)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sample %s: %w", k, err)
	}
	slices.Sort(order)
	out := make([]query.ClassSample, 0, len(order))
	for _, c := range order {
		h := byClass[c]
		// Key order: a fixed order whatever the rows' arrival.
		slices.SortFunc(h.items, func(a, b sampled) int { return cmp.Compare(a.key, b.key) })
		cs := query.ClassSample{Class: c, Count: h.n, Values: make(map[string][]int64, len(comps))}
		for i, name := range comps {
			v := make([]int64, len(h.items))
			for j, it := range h.items {
				v[j] = it.vals[i]
			}
			cs.Values[name] = v
		}
		out = append(out, cs)
	}
	return out, nil
}

// sampled is one record of a sample: its key and component values.
type sampled struct {
	key  uint64
	vals []int64
}

// sampleHeap keeps the smallest keys seen, the largest on top (a max-heap)
// so that a smaller newcomer replaces it; n counts every record offered.
type sampleHeap struct {
	items []sampled
	n     int64
}

func (h *sampleHeap) offer(s sampled, maxN int) {
	if len(h.items) < maxN {
		heap.Push(h, s)
		return
	}
	if s.key < h.items[0].key {
		h.items[0] = s
		heap.Fix(h, 0)
	}
}

func (h *sampleHeap) Len() int           { return len(h.items) }
func (h *sampleHeap) Less(i, j int) bool { return h.items[i].key > h.items[j].key }
func (h *sampleHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *sampleHeap) Push(x any)         { h.items = append(h.items, x.(sampled)) }
func (h *sampleHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
