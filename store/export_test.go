package store

import (
	"context"
	"errors"
	"time"
)

// failingRollups fails every insert into the rollups table, as a
// read-only database user would.
type failingRollups struct{ inserter }

func (f failingRollups) insert(ctx context.Context, c *colSet) error {
	if c.t.name == rollupTable.name {
		return errors.New("rollups: read-only user")
	}
	return f.inserter.insert(ctx, c)
}

// FailRollupWrites makes s's rollup writes fail (or work again). Every
// rollup write, the writer's and the readers', goes through the querier.
func FailRollupWrites(s Store, fail bool) {
	q := s.(*engine).querier
	if f, ok := q.ins.(failingRollups); ok {
		q.ins = f.inserter
	}
	if fail {
		q.ins = failingRollups{q.ins}
	}
}

// SpoilAnHourRollup stores a newer hour row of transactions with one record
// too many, as a writer that died between a minute's and its hour's
// recompute could leave behind (in the other direction).
func SpoilAnHourRollup(ctx context.Context, s Store) error {
	q := s.(*engine).querier
	rk, _ := rollupKindOf(q.d, txTable)
	rows, err := q.readRollups(ctx, rk, hourKind(rk.name), 0, 0)
	if err != nil {
		return err
	}
	for k, r := range rows {
		r.n++
		return insertRollups(ctx, q.ins, rk, hourKind(rk.name), map[rollupKey]*rollupRow{k: r}, q.versions.after(0))
	}
	return errors.New("no hour rollups to spoil")
}

// BetweenRollupQueries makes s run f between each rollup recompute's count
// and histogram queries (nil: nothing).
func BetweenRollupQueries(s Store, f func()) {
	s.(*engine).querier.betweenRollupQueries = f
}

// SkewRollupClock sets s's rollup version clock off the wall clock by d,
// as on a sensor whose clock is wrong.
func SkewRollupClock(s Store, d time.Duration) {
	s.(*engine).querier.versions.skew.Store(int64(d))
}
