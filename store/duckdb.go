package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// duckInserter appends through DuckDB's Appender on a dedicated connection.
type duckInserter struct {
	*querier
	mu   sync.Mutex
	conn driver.Conn
}

func (d *duckInserter) insert(ctx context.Context, t table, rows [][]any) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	app, err := duckdb.NewAppender(d.conn, "", "", t.name)
	if err != nil {
		return fmt.Errorf("duckdb appender %s: %w", t.name, err)
	}
	for _, r := range rows {
		vals := make([]driver.Value, len(r))
		for i, v := range r {
			vals[i] = v
		}
		if err := app.AppendRow(vals...); err != nil {
			app.Close()
			return fmt.Errorf("duckdb append %s: %w", t.name, err)
		}
	}
	if err := app.Close(); err != nil {
		return fmt.Errorf("duckdb append %s: %w", t.name, err)
	}
	return nil
}

func duckDDL(t table) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (", t.name)
	for i, c := range t.cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s NOT NULL", c.name, duckTypes[c.kind])
	}
	b.WriteString(")")
	return b.String()
}

func openDuck(ctx context.Context, path string, opts Options) (Store, error) {
	conn, err := duckdb.NewConnector(path, nil)
	if err != nil {
		return nil, fmt.Errorf("open duckdb %q: %w", path, err)
	}
	db := sql.OpenDB(conn)
	fail := func(err error) (Store, error) {
		db.Close()
		conn.Close()
		return nil, err
	}
	q := &querier{db: db, d: duckDialect}
	if err := db.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("open duckdb %q: %w", path, err))
	}
	ms := []migration{{1, func(ctx context.Context) error {
		for _, t := range tables {
			have, err := duckColumns(ctx, db, t.name)
			if err != nil {
				return err
			}
			if len(have) > 0 {
				if err := checkColumns(t, have); err != nil {
					return err
				}
				continue
			}
			if _, err := db.ExecContext(ctx, duckDDL(t)); err != nil {
				return fmt.Errorf("create %s: %w", t.name, err)
			}
		}
		return nil
	}}}
	if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL, applied TIMESTAMP NOT NULL)"); err != nil {
		return fail(fmt.Errorf("duckdb schema_migrations: %w", err))
	}
	cur := func(ctx context.Context) (int, error) {
		var v int
		err := db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v)
		return v, err
	}
	rec := func(ctx context.Context, v int) error {
		_, err := db.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied) VALUES (?, ?)", v, time.Now().UTC())
		return err
	}
	if err := migrate(ctx, db, cur, rec, ms); err != nil {
		return fail(fmt.Errorf("duckdb %q: %w", path, err))
	}
	dconn, err := conn.Connect(ctx)
	if err != nil {
		return fail(fmt.Errorf("duckdb appender connection: %w", err))
	}
	ins := &duckInserter{querier: q, conn: dconn}
	if opts.SpillDir == "" {
		opts.SpillDir = "-" // an embedded engine does not go away; spill only on request
	}
	w, err := newWriter(ins, opts)
	if err != nil {
		dconn.Close()
		return fail(err)
	}
	e := &engine{querier: q, sink: sink{w}, w: w}
	e.closeFn = func() error {
		err1 := dconn.Close()
		err2 := db.Close()
		err3 := conn.Close()
		if err1 != nil {
			return fmt.Errorf("duckdb close: %w", err1)
		}
		if err2 != nil {
			return fmt.Errorf("duckdb close: %w", err2)
		}
		if err3 != nil {
			return fmt.Errorf("duckdb close: %w", err3)
		}
		return nil
	}
	err = e.startTTL(ctx, opts.TTL, func(ctx context.Context, cutoff time.Time) error {
		for _, t := range tables {
			if _, err := db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE day < ?", t.name), cutoff); err != nil {
				return fmt.Errorf("drop old %s: %w", t.name, err)
			}
		}
		return nil
	})
	if err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func duckColumns(ctx context.Context, db *sql.DB, name string) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", name)
	if err != nil {
		return nil, fmt.Errorf("duckdb columns of %s: %w", name, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
