package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// heal reopens a DuckDB file after a fatal error, keeping what it holds,
// and leaves alone an in-memory database (a new one would be empty) and
// errors that do not invalidate the database.
func TestDuckHealReopensOnlyFiles(t *testing.T) {
	ctx := context.Background()
	fatal := fmt.Errorf("insert: %w", &duckdb.Error{Type: duckdb.ErrorTypeFatal, Msg: "FATAL Error: database has been invalidated"})
	other := fmt.Errorf("insert: %w", &duckdb.Error{Type: duckdb.ErrorTypeTransaction, Msg: "TransactionContext Error: Failed to commit"})
	for _, c := range []struct {
		path     string
		err      error
		reopened bool
		newPool  bool
	}{
		{filepath.Join(t.TempDir(), "heal.duckdb"), fatal, true, true},
		{filepath.Join(t.TempDir(), "keep.duckdb"), other, false, false},
		{"", fatal, false, false},
	} {
		d, err := connectDuck(ctx, c.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.sqlDB().ExecContext(ctx, "CREATE TABLE t AS SELECT 42 AS x"); err != nil {
			t.Fatal(err)
		}
		old := d.sqlDB()
		reopened, err := d.heal(ctx, c.err)
		if err != nil || reopened != c.reopened || (d.sqlDB() != old) != c.newPool {
			t.Errorf("%q after %v: reopened %v (%v), new pool %v", c.path, c.err, reopened, err, d.sqlDB() != old)
		}
		var x int
		if err := d.sqlDB().QueryRowContext(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 42 {
			t.Errorf("%q: after heal the table reads %d, %v", c.path, x, err)
		}
		if err := closeBackend(d); err != nil {
			t.Error(err)
		}
	}
}
