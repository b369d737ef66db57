package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// engine is the part both stores share: the query side over database/sql
// and the batching writer over an engine-specific inserter.
type engine struct {
	*querier
	sink
	w        *writer
	closeFn  func() error
	ttl      func(context.Context) error
	stopTTL  chan struct{}
	closeOne sync.Once
	closeErr error
}

func (e *engine) WriteBatch(ctx context.Context, b Batch) error { return e.w.add(ctx, b) }
func (e *engine) Flush(ctx context.Context) error               { return e.w.flush(ctx) }
func (e *engine) Stats() WriterStats                            { return e.w.statsCopy() }

func (e *engine) Close() error {
	e.closeOne.Do(func() {
		if e.stopTTL != nil {
			close(e.stopTTL)
		}
		werr := e.w.close()
		cerr := e.closeFn()
		e.closeErr = errors.Join(werr, cerr)
	})
	return e.closeErr
}

// startTTL drops expired days now and hourly; TTL is by wall clock because
// retention is an operational limit on disk, not on capture time.
func (e *engine) startTTL(ctx context.Context, ttl time.Duration, drop func(context.Context, time.Time) error) error {
	if ttl <= 0 {
		return nil
	}
	run := func(ctx context.Context) error { return drop(ctx, dayOf(time.Now().Add(-ttl).UnixNano())) }
	if err := run(ctx); err != nil {
		return fmt.Errorf("ttl: %w", err)
	}
	e.stopTTL = make(chan struct{})
	go func() {
		t := time.NewTicker(time.Hour)
		defer t.Stop()
		for {
			select {
			case <-e.stopTTL:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				run(ctx) // a failed pass is retried next hour
				cancel()
			}
		}
	}()
	return nil
}

// migration is one schema version. apply must look at the current state
// first (tables may exist from an interrupted earlier run) and only create
// what is missing.
type migration struct {
	version int
	apply   func(ctx context.Context) error
}

// migrate applies the migrations newer than the recorded version, in order.
func migrate(ctx context.Context, db *sql.DB, current func(context.Context) (int, error), record func(context.Context, int) error, ms []migration) error {
	cur, err := current(ctx)
	if err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	if last := ms[len(ms)-1].version; cur > last {
		return fmt.Errorf("schema version %d is newer than this rtmon knows (%d)", cur, last)
	}
	for _, m := range ms {
		if m.version <= cur {
			continue
		}
		if err := m.apply(ctx); err != nil {
			return fmt.Errorf("schema migration %d: %w", m.version, err)
		}
		if err := record(ctx, m.version); err != nil {
			return fmt.Errorf("schema migration %d: record: %w", m.version, err)
		}
	}
	return nil
}

// createTables is both engines' table-creating migration: it creates each
// of ts that is missing and checks the columns of each that exists.
func createTables(ctx context.Context, ts []table, columnsOf func(context.Context, string) ([]string, error), create func(context.Context, table) error) error {
	for _, t := range ts {
		have, err := columnsOf(ctx, t.name)
		if err != nil {
			return err
		}
		if len(have) > 0 {
			if err := checkColumns(t, have); err != nil {
				return err
			}
			continue
		}
		if err := create(ctx, t); err != nil {
			return fmt.Errorf("create %s: %w", t.name, err)
		}
	}
	return nil
}

// addColumns is both engines' column-adding migration: each column of t
// the existing table lacks is added, in order, at the end (where a fresh
// table has it too, so checkColumns agrees afterwards).
func addColumns(ctx context.Context, t table, columnsOf func(context.Context, string) ([]string, error), add func(context.Context, table, column) error) error {
	have, err := columnsOf(ctx, t.name)
	if err != nil {
		return err
	}
	got := map[string]bool{}
	for _, h := range have {
		got[h] = true
	}
	for _, c := range t.cols {
		if got[c.name] {
			continue
		}
		if err := add(ctx, t, c); err != nil {
			return fmt.Errorf("add %s.%s: %w", t.name, c.name, err)
		}
	}
	after, err := columnsOf(ctx, t.name)
	if err != nil {
		return err
	}
	return checkColumns(t, after)
}

// zeroOf is a column kind's zero value in SQL, the default for rows that
// existed before the column did.
func zeroOf(k colKind) string {
	if k == kString {
		return "''"
	}
	return "0"
}

// queryStrings runs a query selecting one string column.
func queryStrings(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// columnDefs lists t's columns as "name type<suffix>, ..." in an engine's
// types.
func columnDefs(t table, types map[colKind]string, suffix string) string {
	defs := make([]string, len(t.cols))
	for i, c := range t.cols {
		defs[i] = c.name + " " + types[c.kind] + suffix
	}
	return strings.Join(defs, ", ")
}

// checkColumns verifies an existing table has the expected columns in
// order, so a stale or foreign table is reported rather than written into.
func checkColumns(t table, have []string) error {
	want := t.names()
	if strings.Join(have, ",") != strings.Join(want, ",") {
		return fmt.Errorf("table %s exists with columns %v, want %v", t.name, have, want)
	}
	return nil
}
