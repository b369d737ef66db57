package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// duckFeed inserts a colSet with INSERT ... SELECT * FROM a Go table
// function that writes the typed column slices straight into DuckDB's
// vectors (no per-value driver.Value boxing as with the Appender), and
// lets DuckDB run the insert, including the row-group compression, on
// several threads.
var (
	feedSets sync.Map // token -> *colSet
	feedNext atomic.Int64
)

func feedName(t table) string { return "rtmon_feed_" + t.name }

var duckTypeIDs = map[colKind]duckdb.Type{kInt64: duckdb.TYPE_BIGINT, kInt32: duckdb.TYPE_INTEGER, kUInt32: duckdb.TYPE_UINTEGER,
	kUInt16: duckdb.TYPE_USMALLINT, kString: duckdb.TYPE_VARCHAR, kDate: duckdb.TYPE_DATE}

func registerFeeds(ctx context.Context, db *sql.DB) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, t := range append([]table{rollupTable, annotationTable}, tables...) {
		infos := make([]duckdb.ColumnInfo, len(t.cols))
		for i, col := range t.cols {
			var ti duckdb.TypeInfo
			if col.kind == kInt64Array {
				el, err := duckdb.NewTypeInfo(duckdb.TYPE_BIGINT)
				if err != nil {
					return err
				}
				ti, err = duckdb.NewListInfo(el)
				if err != nil {
					return err
				}
			} else {
				ti, err = duckdb.NewTypeInfo(duckTypeIDs[col.kind])
				if err != nil {
					return err
				}
			}
			infos[i] = duckdb.ColumnInfo{Name: col.name, T: ti}
		}
		tok, err := duckdb.NewTypeInfo(duckdb.TYPE_BIGINT)
		if err != nil {
			return err
		}
		f := duckdb.ParallelChunkTableFunction{
			Config: duckdb.TableFunctionConfig{Arguments: []duckdb.TypeInfo{tok}},
			BindArguments: func(named map[string]any, args ...any) (duckdb.ParallelChunkTableSource, error) {
				id, _ := args[0].(int64)
				v, ok := feedSets.Load(id)
				if !ok {
					return nil, fmt.Errorf("%s: no batch %d", feedName(t), id)
				}
				return &feedSource{cs: v.(*colSet), infos: infos}, nil
			},
		}
		if err := duckdb.RegisterTableUDF(c, feedName(t), f); err != nil {
			return fmt.Errorf("register %s: %w", feedName(t), err)
		}
	}
	return nil
}

type feedSource struct {
	cs    *colSet
	infos []duckdb.ColumnInfo
	next  atomic.Int64
}

func (f *feedSource) ColumnInfos() []duckdb.ColumnInfo { return f.infos }
func (f *feedSource) Cardinality() *duckdb.CardinalityInfo {
	return &duckdb.CardinalityInfo{Cardinality: uint(f.cs.n), Exact: true}
}
func (f *feedSource) Init() duckdb.ParallelTableSourceInfo {
	return duckdb.ParallelTableSourceInfo{MaxThreads: 2}
}
func (f *feedSource) NewLocalState() any { return &struct{}{} }

func (f *feedSource) FillChunk(_ any, ch duckdb.DataChunk) error {
	size := duckdb.GetDataChunkCapacity()
	lo := int(f.next.Add(int64(size))) - size
	hi := min(lo+size, f.cs.n)
	if lo >= hi {
		return ch.SetSize(0)
	}
	c := f.cs
	for i, col := range c.cols {
		if err := col.feed(ch, i, lo, hi); err != nil {
			return fmt.Errorf("%s column %s: %w", c.t.name, c.t.cols[i].name, err)
		}
	}
	return ch.SetSize(hi - lo)
}

// duckChunk is the chunk type colVals.feed writes into.
type duckChunk = duckdb.DataChunk

func (v *vals[T]) feed(ch duckChunk, col, lo, hi int) error {
	for r, x := range (*v)[lo:hi] {
		if err := duckdb.SetChunkValue(ch, col, r, x); err != nil {
			return err
		}
	}
	return nil
}

func feedInsert(ctx context.Context, db *sql.DB, cs *colSet) error {
	id := feedNext.Add(1)
	feedSets.Store(id, cs)
	defer feedSets.Delete(id)
	_, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO %s (%s) SELECT * FROM %s(CAST(? AS BIGINT))",
		cs.t.name, strings.Join(cs.t.names(), ", "), feedName(cs.t)), id)
	return err
}
