package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// duckBackend is an embedded DuckDB database (a file, or memory). Inserts
// go through the typed table function of duckfeed.go. A large table is
// split (chunkRows): the three tables and the halves of the biggest one
// then run in parallel.
//
// A write that fails badly enough (a checkpoint on a full disk) makes
// DuckDB invalidate the whole database until it is opened again; heal
// then reopens it, so that the writer's retries can succeed once there is
// room again.
type duckBackend struct {
	path string // "" in memory
	db   atomic.Pointer[sql.DB]
	mu   sync.Mutex // serializes heal
	// broken: the database was invalidated and is not open again yet.
	broken bool
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
	d := &duckBackend{path: path}
	db, err := openDuck(ctx, path)
	if err != nil {
		return nil, err
	}
	d.db.Store(db)
	return d, nil
}

// openDuck opens one pool on the database at path. Closing the pool closes
// the database (sql.DB closes a connector that is an io.Closer).
func openDuck(ctx context.Context, path string) (*sql.DB, error) {
	connector, err := duckdb.NewConnector(path, nil)
	if err != nil {
		return nil, fmt.Errorf("open duckdb %q: %w", path, err)
	}
	db := sql.OpenDB(connector)
	if err := db.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("open duckdb %q: %w", path, err), db.Close())
	}
	if err := registerFeeds(ctx, db); err != nil {
		return nil, errors.Join(fmt.Errorf("duckdb %q: %w", path, err), db.Close())
	}
	return db, nil
}

func (d *duckBackend) String() string   { return fmt.Sprintf("duckdb %q", d.path) }
func (d *duckBackend) sqlDB() *sql.DB   { return d.db.Load() }
func (d *duckBackend) dialect() dialect { return duckDialect }

func (d *duckBackend) insert(ctx context.Context, cs *colSet) error {
	if err := feedInsert(ctx, d.sqlDB(), cs); err != nil {
		return fmt.Errorf("duckdb insert %s: %w", cs.t.name, err)
	}
	return nil
}

// heal reopens the database when err says DuckDB invalidated it, or when
// an earlier reopen failed (the disk may still be full: the WAL replay
// needs room too). It reports whether it reopened. Queries in flight on
// the old pool fail; new ones go to the new pool.
func (d *duckBackend) heal(ctx context.Context, err error) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// An in-memory database lives only in the instance: a new one would
	// be empty, without even the schema.
	if d.path == "" || (!d.broken && !isFatalDuck(err)) {
		return false, nil
	}
	d.broken = true
	// The invalidated instance must be closed before the file is opened
	// again: two instances of one file in one process would both write it.
	if cerr := d.db.Load().Close(); cerr != nil {
		return false, fmt.Errorf("close invalidated duckdb %q: %w", d.path, cerr)
	}
	db, oerr := openDuck(ctx, d.path)
	if oerr != nil {
		return false, fmt.Errorf("reopen: %w", oerr)
	}
	d.db.Store(db)
	d.broken = false
	return true, nil
}

// isFatalDuck: DuckDB reports that it invalidated the database (every
// later statement fails until it is reopened).
func isFatalDuck(err error) bool {
	var de *duckdb.Error
	return errors.As(err, &de) && de.Type == duckdb.ErrorTypeFatal
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

// spillDir: a file database spills next to itself (created only when a
// batch is spilled), so that the next Open of that file replays it; on a
// disk that is full for both, writers get backpressure instead. In memory
// there is no disk to fill and nothing to replay into.
func (d *duckBackend) spillDir() string {
	if d.path == "" {
		return "-"
	}
	return d.path + ".spill"
}

// hangs: an embedded engine that is slow is only slow; spilling its
// backlog would take the CPU it needs to catch up.
func (d *duckBackend) hangs() bool { return false }

func (d *duckBackend) prepareSchema(ctx context.Context) error {
	if _, err := d.sqlDB().ExecContext(ctx, "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER NOT NULL, applied TIMESTAMP NOT NULL)"); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	return nil
}

func (d *duckBackend) createTable(ctx context.Context, t table) error {
	_, err := d.sqlDB().ExecContext(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (%s)", t.name, columnDefs(t, duckTypes, " NOT NULL")))
	return err
}

func (d *duckBackend) dropTable(ctx context.Context, name string) error {
	_, err := d.sqlDB().ExecContext(ctx, "DROP TABLE IF EXISTS "+name)
	return err
}

func (d *duckBackend) addColumn(ctx context.Context, t table, c column) error {
	_, err := d.sqlDB().ExecContext(ctx, fmt.Sprintf("ALTER TABLE %s ADD COLUMN %s %s DEFAULT %s", t.name, c.name, duckTypes[c.kind], zeroOf(c.kind)))
	return err
}

func (d *duckBackend) schemaVersion(ctx context.Context) (int, error) {
	var v int
	err := d.sqlDB().QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&v)
	return v, err
}

func (d *duckBackend) recordVersion(ctx context.Context, v int) error {
	_, err := d.sqlDB().ExecContext(ctx, "INSERT INTO schema_migrations (version, applied) VALUES (?, ?)", v, time.Now().UTC())
	return err
}

func (d *duckBackend) dropDaysBefore(ctx context.Context, cutoff time.Time) error {
	for _, t := range retainedTables() {
		if _, err := d.sqlDB().ExecContext(ctx, fmt.Sprintf("DELETE FROM %s WHERE day < ?", t.name), cutoff); err != nil {
			return fmt.Errorf("drop old %s: %w", t.name, err)
		}
	}
	return nil
}

// connections: the pool open now (closing it closes the database).
func (d *duckBackend) connections() []io.Closer { return []io.Closer{d.sqlDB()} }

func (d *duckBackend) columnsQuery(name string) (string, []any) {
	return "SELECT column_name FROM information_schema.columns WHERE table_schema = 'main' AND table_name = ? ORDER BY ordinal_position", []any{name}
}

// isNoSpace: err is for lack of disk space. DuckDB says so only in its
// message (its error type is "transaction" or "fatal", whatever the
// cause), so the message is matched here and nowhere else.
func isNoSpace(err error) bool {
	if errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var de *duckdb.Error
	return errors.As(err, &de) && strings.Contains(de.Msg, "No space left on device")
}
