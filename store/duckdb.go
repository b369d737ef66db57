package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// duckBackend is an embedded DuckDB database (a file, or memory). Inserts
// go through the typed table function of duckfeed.go. A large table is
// split (chunkRows): the three tables and the halves of the biggest one
// then run in parallel.
type duckBackend struct {
	path      string // "" in memory
	connector *duckdb.Connector
	db        *sql.DB
}

// duckParallel is how many concurrent inserts one table's rows are split
// into (measured faster than one: 124-140k vs 145-179k tx/s).
const duckParallel = 2

// duckRowGroup is DuckDB's row group size: an append of at least this many
// rows is written straight to the file, a smaller one goes through the WAL
// and is copied again at checkpoint.
const duckRowGroup = 122880

// connectDuck opens the database at path ("": in memory) and registers the
// feed functions the inserts read from.
func connectDuck(ctx context.Context, path string) (*duckBackend, error) {
	connector, err := duckdb.NewConnector(path, nil)
	if err != nil {
		return nil, fmt.Errorf("open duckdb %q: %w", path, err)
	}
	d := &duckBackend{path: path, connector: connector, db: sql.OpenDB(connector)}
	if err := d.db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open duckdb %q: %w", path, err), closeBackend(d))
	}
	if err := registerFeeds(ctx, d.db); err != nil {
		return nil, errors.Join(fmt.Errorf("duckdb %q: %w", path, err), closeBackend(d))
	}
	return d, nil
}

func (d *duckBackend) String() string   { return fmt.Sprintf("duckdb %q", d.path) }
func (d *duckBackend) sqlDB() *sql.DB   { return d.db }
func (d *duckBackend) dialect() dialect { return duckDialect }

func (d *duckBackend) insert(ctx context.Context, cs *colSet) error {
	if err := feedInsert(ctx, d.db, cs); err != nil {
		return fmt.Errorf("duckdb insert %s: %w", cs.t.name, err)
	}
	return nil
}

func (d *duckBackend) granule() int { return duckRowGroup }

// chunkRows splits a table into duckParallel inserts when every part still
// fills a row group; smaller parts would cost a WAL copy each. Parts are
// whole row groups but the last, so that a batch leaves one partial row
// group (merged at checkpoint) instead of one per part.
func (d *duckBackend) chunkRows(n int) int {
	if n >= duckParallel*duckRowGroup {
		per := (n + duckParallel - 1) / duckParallel
		return (per + duckRowGroup - 1) / duckRowGroup * duckRowGroup
	}
	return 0
}

// batchRows: DuckDB writes a full row group (122,880 rows) straight to the
// file; smaller appends go through the WAL and are copied again at
// checkpoint, which halves the ingest rate. 800k records hold ~450k
// transactions: two inserts of more than a row group.
func (d *duckBackend) batchRows(requested int) int {
	if requested <= 0 {
		return 800000
	}
	return requested
}

// spillDir: an embedded engine does not go away; spill only on request.
func (d *duckBackend) spillDir() string { return "-" }

func (d *duckBackend) prepareSchema(ctx context.Context) error {
	if _, err := d.db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL, applied TIMESTAMP NOT NULL)"); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	return nil
}

func (d *duckBackend) createTable(ctx context.Context, t table) error {
	_, err := d.db.ExecContext(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", t.name, columnDefs(t, duckTypes, " NOT NULL")))
	return err
}

func (d *duckBackend) addColumn(ctx context.Context, t table, c column) error {
	_, err := d.db.ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s DEFAULT %s", t.name, c.name, duckTypes[c.kind], zeroOf(c.kind)))
	return err
}

func (d *duckBackend) schemaVersion(ctx context.Context) (int, error) {
	var v int
	err := d.db.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v)
	return v, err
}

func (d *duckBackend) recordVersion(ctx context.Context, v int) error {
	_, err := d.db.ExecContext(ctx, "INSERT INTO schema_migrations (version, applied) VALUES (?, ?)", v, time.Now().UTC())
	return err
}

func (d *duckBackend) dropDaysBefore(ctx context.Context, cutoff time.Time) error {
	for _, t := range append([]table{rollupTable}, tables...) {
		if _, err := d.db.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE day < ?", t.name), cutoff); err != nil {
			return fmt.Errorf("drop old %s: %w", t.name, err)
		}
	}
	return nil
}

func (d *duckBackend) connections() []io.Closer { return []io.Closer{d.db, d.connector} }

func (d *duckBackend) columnsQuery(name string) (string, []any) {
	return "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", []any{name}
}
