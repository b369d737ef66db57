package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// duckInserter inserts through the typed table function of duckfeed.go
// (or, with RTMON_DUCK_APPENDER=1, DuckDB's Appender, which runs on the
// calling goroutine with duckConnsPerTable connections per table). A large
// table is split (chunkRows): the three tables and the halves of the
// biggest one then run in parallel.
type duckInserter struct {
	*querier
	pools map[string]chan driver.Conn
	all   []driver.Conn
}

const duckConnsPerTable = 2

// duckFeedOn: insert through the typed table function (duckfeed.go);
// RTMON_DUCK_APPENDER=1 falls back to the Appender, for A/B measurement or
// if the table-function path misbehaves somewhere.
var duckFeedOn = os.Getenv("RTMON_DUCK_APPENDER") == ""

// duckRowGroup is DuckDB's row group size: an append of at least this many
// rows is written straight to the file, a smaller one goes through the WAL
// and is copied again at checkpoint.
const duckRowGroup = 122880

func (d *duckInserter) insert(ctx context.Context, cs *colSet) error {
	t := cs.t
	if duckFeedOn {
		if err := feedInsert(ctx, d.db, cs); err != nil {
			return fmt.Errorf("duckdb insert %s: %w", t.name, err)
		}
		return nil
	}
	var conn driver.Conn
	select {
	case conn = <-d.pools[t.name]:
	case <-ctx.Done():
		return fmt.Errorf("duckdb append %s: %w", t.name, ctx.Err())
	}
	defer func() { d.pools[t.name] <- conn }()
	app, err := duckdb.NewAppender(conn, "", "", t.name)
	if err != nil {
		return fmt.Errorf("duckdb appender %s: %w", t.name, err)
	}
	vals := make([]driver.Value, len(t.cols))
	for r := 0; r < cs.n; r++ {
		cs.row(r, vals)
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

func (d *duckInserter) granule() int { return duckRowGroup }

// chunkRows splits a table over its connections when every part still
// fills a row group; smaller parts would cost a WAL copy each. Parts are
// whole row groups but the last, so that a batch leaves one partial row
// group (merged at checkpoint) instead of one per part.
func (d *duckInserter) chunkRows(n int) int {
	if n >= duckConnsPerTable*duckRowGroup {
		per := (n + duckConnsPerTable - 1) / duckConnsPerTable
		return (per + duckRowGroup - 1) / duckRowGroup * duckRowGroup
	}
	return 0
}

func duckDDL(t table) string {
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", t.name, columnDefs(t, duckTypes, " NOT NULL"))
}

func openDuck(ctx context.Context, path string, opts Options, userBatch bool) (Store, error) {
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
	columnsOf := func(ctx context.Context, name string) ([]string, error) { return duckColumns(ctx, db, name) }
	create := func(ctx context.Context, t table) error { _, err := db.ExecContext(ctx, duckDDL(t)); return err }
	ms := []migration{
		{1, func(ctx context.Context) error { return createTables(ctx, tables, columnsOf, create) }},
		{2, func(ctx context.Context) error { return createTables(ctx, []table{rollupTable}, columnsOf, create) }},
		{3, func(ctx context.Context) error {
			return addColumns(ctx, pvTable, columnsOf, func(ctx context.Context, t table, c column) error {
				_, err := db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s DEFAULT %s", t.name, c.name, duckTypes[c.kind], zeroOf(c.kind)))
				return err
			})
		}},
	}
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
	if duckFeedOn {
		if err := registerFeeds(ctx, db); err != nil {
			return fail(fmt.Errorf("duckdb %q: %w", path, err))
		}
	}
	ins := &duckInserter{querier: q, pools: map[string]chan driver.Conn{}}
	closeConns := func() error {
		var errs []error
		for _, c := range ins.all {
			errs = append(errs, c.Close())
		}
		return errors.Join(errs...)
	}
	for _, t := range append([]table{rollupTable}, tables...) {
		ins.pools[t.name] = make(chan driver.Conn, duckConnsPerTable)
		for range duckConnsPerTable {
			dconn, err := conn.Connect(ctx)
			if err != nil {
				closeConns()
				return fail(fmt.Errorf("duckdb appender connection: %w", err))
			}
			ins.all = append(ins.all, dconn)
			ins.pools[t.name] <- dconn
		}
	}
	if opts.SpillDir == "" {
		opts.SpillDir = "-" // an embedded engine does not go away; spill only on request
	}
	if !userBatch {
		// DuckDB writes a full row group (122,880 rows) straight to the
		// file; smaller appends go through the WAL and are copied again
		// at checkpoint, which halves the ingest rate. 800k records hold
		// ~450k transactions: two appenders of more than a row group.
		opts.BatchRows = 800000
	}
	if opts.Rollups == "" || opts.Rollups == "auto" {
		opts.Rollups = "on"
	}
	w, err := newWriter(ins, q, opts)
	if err != nil {
		closeConns()
		return fail(err)
	}
	e := &engine{querier: q, sink: sink{w}, w: w}
	e.closeFn = func() error {
		err1 := closeConns()
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
		for _, t := range append([]table{rollupTable}, tables...) {
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
	cols, err := queryStrings(ctx, db, "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", name)
	if err != nil {
		return nil, fmt.Errorf("duckdb columns of %s: %w", name, err)
	}
	return cols, nil
}
