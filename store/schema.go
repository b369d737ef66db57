package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// migration is one schema version. apply must look at the current state
// first (tables may exist from an interrupted earlier run) and only create
// what is missing.
type migration struct {
	version int
	apply   func(ctx context.Context) error
}

// migrate applies the migrations newer than the recorded version, in order.
func migrate(ctx context.Context, s schema, ms []migration) error {
	cur, err := s.schemaVersion(ctx)
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
		if err := s.recordVersion(ctx, m.version); err != nil {
			return fmt.Errorf("schema migration %d: record: %w", m.version, err)
		}
	}
	return nil
}

// createTables creates each of ts that is missing and checks the columns
// of each that exists.
func createTables(ctx context.Context, s schema, ts []table) error {
	for _, t := range ts {
		have, err := columnsOf(ctx, s, t.name)
		if err != nil {
			return err
		}
		if len(have) > 0 {
			if err := checkColumns(t, have); err != nil {
				return err
			}
			continue
		}
		if err := s.createTable(ctx, t); err != nil {
			return fmt.Errorf("create %s: %w", t.name, err)
		}
	}
	return nil
}

// remakeTable drops t where it exists with other columns than t's (in
// cluster mode, where its Distributed or its local table does), then
// creates it. Only for derived tables: their rows are lost.
func remakeTable(ctx context.Context, s schema, t table) error {
	for _, name := range []string{t.name, localName(t.name)} {
		have, err := columnsOf(ctx, s, name)
		if err != nil {
			return err
		}
		if len(have) > 0 && checkColumns(t, have) != nil {
			if err := s.dropTable(ctx, t.name); err != nil {
				return fmt.Errorf("drop %s to make it again: %w", t.name, err)
			}
			break
		}
	}
	return createTables(ctx, s, []table{t})
}

// addColumns adds each column of t the existing table lacks, in order, at
// the end (where a fresh table has it too, so checkColumns agrees
// afterwards).
func addColumns(ctx context.Context, s schema, t table) error {
	have, err := columnsOf(ctx, s, t.name)
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
		if err := s.addColumn(ctx, t, c); err != nil {
			return fmt.Errorf("add %s.%s: %w", t.name, c.name, err)
		}
	}
	after, err := columnsOf(ctx, s, t.name)
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

// columnsOf lists a table's columns in order; none if it does not exist.
func columnsOf(ctx context.Context, s schema, table string) ([]string, error) {
	query, args := s.columnsQuery(table)
	cols, err := queryStrings(ctx, s.sqlDB(), query, args...)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	return cols, nil
}

// queryStrings runs a query selecting one string column.
func queryStrings(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	return queryAll(ctx, db, query, args, func(rows *sql.Rows) (v string, err error) {
		err = rows.Scan(&v)
		return v, err
	})
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
