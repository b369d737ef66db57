package store

import (
	"fmt"
	"net/netip"
	"time"
)

// colSet accumulates rows of one table column by column, in typed slices:
// ClickHouse takes the slices as they are (no per-value boxing, which
// dominated the insert cost), DuckDB's feed copies them into its vectors.
type colSet struct {
	t    table
	cols []colVals // by column, in table order
	k    int       // next column of the current row
	n    int
	// dayOf cache: records of a batch mostly share a day.
	lastDay  int64
	lastDate time.Time
}

// colVals is one column's values: a *vals[T] of its kind's Go type.
type colVals interface {
	// all is the whole typed slice, as ClickHouse's driver takes it.
	all() any
	// feed copies rows [lo, hi) into column col of a DuckDB chunk
	// (duckfeed.go).
	feed(ch duckChunk, col, lo, hi int) error
}

type vals[T any] []T

func (v *vals[T]) all() any { return []T(*v) }

func newVals[T any](capacity int) colVals {
	v := make(vals[T], 0, capacity)
	return &v
}

// newCol makes a column of each kind; the Go types are the ones both
// engines' drivers take for the kind's SQL type.
var newCol = map[colKind]func(capacity int) colVals{
	kInt64:      newVals[int64],
	kInt32:      newVals[int32],
	kUInt32:     newVals[uint32],
	kUInt16:     newVals[uint16],
	kString:     newVals[string],
	kDate:       newVals[time.Time],
	kInt64Array: newVals[[]int64],
}

func newColSet(t table, capacity int) *colSet {
	c := &colSet{t: t, cols: make([]colVals, len(t.cols)), lastDay: -1 << 62}
	for i, col := range t.cols {
		c.cols[i] = newCol[col.kind](capacity)
	}
	return c
}

// next checks the previous row was complete; a mismatch is a programming
// error in the row functions, caught by any test.
func (c *colSet) next() {
	if c.k != 0 && c.k != len(c.t.cols) {
		panic(fmt.Sprintf("store: %s row has %d values, want %d", c.t.name, c.k, len(c.t.cols)))
	}
	c.k = 0
	c.n++
}

// done checks the last row was complete.
func (c *colSet) done() {
	if c.n > 0 && c.k != len(c.t.cols) {
		panic(fmt.Sprintf("store: %s row has %d values, want %d", c.t.name, c.k, len(c.t.cols)))
	}
}

// push appends v to the next column, which must be of v's type.
func push[T any](c *colSet, v T) {
	var col *vals[T]
	if c.k < len(c.cols) {
		col, _ = c.cols[c.k].(*vals[T])
	}
	if col == nil {
		panic(fmt.Sprintf("store: %s column %d: wrong kind", c.t.name, c.k))
	}
	*col = append(*col, v)
	c.k++
}

func (c *colSet) I64(v int64)   { push(c, v) }
func (c *colSet) I32(v int)     { push(c, int32(v)) }
func (c *colSet) U32(v uint32)  { push(c, v) }
func (c *colSet) U16(v uint16)  { push(c, v) }
func (c *colSet) Str(v string)  { push(c, v) }
func (c *colSet) Arr(v []int64) { push(c, i64s(v)) }
func (c *colSet) Day(ns int64) {
	d := ns / int64(24*time.Hour)
	if d != c.lastDay {
		c.lastDay, c.lastDate = d, dayOf(ns)
	}
	push(c, c.lastDate)
}

// row starts a record's row with the columns every table begins with: the
// day it is partitioned by, the sensor, the record's id.
func (c *colSet) row(day int64, sensor, id string) {
	c.next()
	c.Day(day)
	c.Str(sensor)
	c.Str(clip(id, maxID))
}

// Endpoint appends an address and port column pair.
func (c *colSet) Endpoint(a netip.Addr, port uint16) {
	c.Str(addrKey(a))
	c.U16(port)
}

// Status appends an HTTP status (0: no response); a value outside uint16
// is no status a parser gives.
func (c *colSet) Status(code int) { c.U16(uint16(code)) }

// columns returns one typed slice per column, in table order.
func (c *colSet) columns() []any {
	out := make([]any, len(c.cols))
	for i, col := range c.cols {
		out[i] = col.all()
	}
	return out
}
