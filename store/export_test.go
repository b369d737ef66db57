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

// SpoilAnHourRollup stores a newer hour row of transactions with one record
// too many, as a writer that died between a minute's and its hour's
// recompute could leave behind (in the other direction).
func SpoilAnHourRollup(ctx context.Context, s Store) error {
	e := s.(*engine)
	rk, _ := rollupKindOf(e.d, txTable)
	rows, err := e.readRollups(ctx, hourKind(rk.name), 0, 0)
	if err != nil {
		return err
	}
	for k, r := range rows {
		r.n++
		return insertRollups(ctx, e.w.ins, rk, hourKind(rk.name), map[rollupKey]*rollupRow{k: r}, nextVersion())
	}
	return errors.New("no hour rollups to spoil")
}
