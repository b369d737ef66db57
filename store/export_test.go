package store

import (
	"context"
	"errors"
)

// SetWriterRefreshesRollups lets tests play a writer that stops between
// an insert and its rollup recompute.
func SetWriterRefreshesRollups(on bool) { writerRefreshesRollups = on }

// failingRollups fails every insert into the rollups table, as a
// read-only database user would.
type failingRollups struct{ inserter }

func (f failingRollups) insert(ctx context.Context, c *colSet) error {
	if c.t.name == rollupTable.name {
		return errors.New("rollups: read-only user")
	}
	return f.inserter.insert(ctx, c)
}

// FailRollupWrites makes s's rollup writes fail (or work again).
func FailRollupWrites(s Store, fail bool) {
	e := s.(*engine)
	if f, ok := e.w.ins.(failingRollups); ok {
		e.w.ins = f.inserter
	}
	if fail {
		e.w.ins = failingRollups{e.w.ins}
	}
}
