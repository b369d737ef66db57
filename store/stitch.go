package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// What cross-sensor stitching (package stitch) needs of a store: every
// sensor's records of a time range, a way to put a stitched pageview in
// the place of the partial ones, and a checkpoint per partition. It reads
// and writes the engine directly, beside the writer: a replacement must
// delete and insert as one step, which the batching writer does not do.

// checkpointTable keeps each stitching partition's progress: one row per
// window done; the newest time of a name is where a restart resumes. The
// columns fit the engines' default record table (ReplacingMergeTree
// ordered by class, start_ns, id on ClickHouse).
var checkpointTable = table{"stitch_checkpoints", cols(`day:d sensor:s id:s class:s start_ns:i64`)}

// Stitching is the stitch step's access to a store.
type Stitching struct{ q *querier }

// StitchingOf returns the stitching access to a store Open returned.
func StitchingOf(s Store) (*Stitching, error) {
	e, ok := s.(*engine)
	if !ok {
		return nil, fmt.Errorf("%w: %T", ErrNoStitching, s)
	}
	return &Stitching{q: e.querier}, nil
}

// ch is the ClickHouse backend, nil for DuckDB.
func (s *Stitching) ch() *chBackend {
	c, _ := s.q.ins.(*chBackend)
	return c
}

// Transactions calls fn with every transaction of every sensor starting in
// [from, to), in start order, and the sensor that stored it. The caller
// bounds the range: rows are streamed, not held.
func (s *Stitching) Transactions(ctx context.Context, from, to int64, fn func(sensor string, tx *reconstruct.Transaction) error) error {
	var sensor string
	err := eachRow(ctx, s.q.db(), fmt.Sprintf("SELECT %s FROM %s WHERE start_ns >= ? AND start_ns < ? ORDER BY start_ns, id",
		txTable.selectList(), s.q.d.table(txTable.name)), []any{from, to}, func(rows *sql.Rows) error {
		tx, err := scanTx(rows, &sensor)
		if err != nil {
			return err
		}
		return fn(sensor, tx)
	})
	if err != nil {
		return fmt.Errorf("stitch: read transactions: %w", err)
	}
	return nil
}

// Connections calls fn with every connection of every sensor first seen
// in [from, to), and the sensor that stored it.
func (s *Stitching) Connections(ctx context.Context, from, to int64, fn func(sensor string, c *reconstruct.Connection) error) error {
	var sensor string
	err := eachRow(ctx, s.q.db(), fmt.Sprintf("SELECT %s FROM %s WHERE start_ns >= ? AND start_ns < ? ORDER BY start_ns, id",
		connTable.selectList(), s.q.d.table(connTable.name)), []any{from, to}, func(rows *sql.Rows) error {
		c, err := scanConn(rows, &sensor)
		if err != nil {
			return err
		}
		return fn(sensor, c)
	})
	if err != nil {
		return fmt.Errorf("stitch: read connections: %w", err)
	}
	return nil
}

// Replacement is one window's result: the pageviews to delete (any
// sensor's, by id), the stitched ones put in their place (each with the
// sensor of its container and its Sensors), and the new pageview id and
// flags of each transaction whose stored ones change, by sensor and
// transaction id.
type Replacement struct {
	Delete    []string
	Pageviews []StitchedPageview
	Tx        map[TxKey]TxUpdate
}

// TxUpdate is what a transaction's row is set to: its pageview id and its
// flags, which carry the new grouping's after-load verdict
// (reconstruct.FlagAfterLoad).
type TxUpdate struct {
	Pageview string
	Flags    reconstruct.Flags
}

// StitchedPageview is a pageview and the sensor row it is stored under.
type StitchedPageview struct {
	Sensor   string
	Pageview *pageview.Pageview
}

// TxKey names a stored transaction.
type TxKey struct {
	Sensor, ID string
	Start      int64
}

// maxInList bounds the values one statement binds.
const maxInList = 500

// Replace applies r: on DuckDB in one transaction; on ClickHouse as a
// delete mutation waited for, then the insert, then an update mutation
// (18.16 has no transactions; each step is idempotent, so a run cut
// between them is repaired by the next run over the window). The rollups
// of the minutes touched are recomputed.
func (s *Stitching) Replace(ctx context.Context, r Replacement) error {
	if len(r.Delete) == 0 && len(r.Pageviews) == 0 && len(r.Tx) == 0 {
		return nil
	}
	gone, err := s.pageviewKeys(ctx, r.Delete)
	if err != nil {
		return err
	}
	minutes := make([]int64, 0, len(gone)+len(r.Pageviews))
	for _, k := range gone {
		minutes = append(minutes, k.minute)
	}
	for _, p := range r.Pageviews {
		minutes = append(minutes, floorDiv(p.Pageview.Start, rollupGrain)*rollupGrain)
	}
	if c := s.ch(); c != nil {
		err = s.replaceCH(ctx, c, r)
	} else {
		err = s.replaceDuck(ctx, r)
	}
	if err != nil {
		return fmt.Errorf("stitch: replace pageviews: %w", err)
	}
	// A (minute, class) whose pageviews all went gets an empty rollup.
	// Every sensor: a stitched pageview may move between sensors' rows.
	if err := s.q.refreshRollups(ctx, pvTable, minuteRuns(minutes, 64), nil, gone); err != nil {
		return fmt.Errorf("stitch: pageview rollups: %w", err)
	}
	return nil
}

// pageviewKeys reads the rollup keys (minute, class, sensor) of the
// stored pageviews ids.
func (s *Stitching) pageviewKeys(ctx context.Context, ids []string) ([]rollupKey, error) {
	var out []rollupKey
	for lo := 0; lo < len(ids); lo += maxInList {
		part := ids[lo:min(lo+maxInList, len(ids))]
		err := eachRow(ctx, s.q.db(), fmt.Sprintf("SELECT start_ns, class, sensor FROM %s WHERE id IN (%s)", s.q.d.table(pvTable.name), marks(len(part))),
			anys(part), func(rows *sql.Rows) error {
				var k rollupKey
				if err := rows.Scan(&k.minute, &k.class, &k.sensor); err != nil {
					return err
				}
				k.minute = floorDiv(k.minute, rollupGrain) * rollupGrain
				out = append(out, k)
				return nil
			})
		if err != nil {
			return nil, fmt.Errorf("stitch: read pageview keys: %w", err)
		}
	}
	return out, nil
}

func anys(v []string) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = x
	}
	return out
}

// pvColSet builds the rows of r's pageviews.
func pvColSet(r Replacement) *colSet {
	cs := newColSet(pvTable, len(r.Pageviews))
	for _, p := range r.Pageviews {
		pvRow(cs, p.Sensor, p.Pageview)
	}
	cs.done()
	return cs
}

// replaceDuck deletes, inserts and updates in one transaction, so a reader
// sees the partial pageviews or the stitched one, never both.
func (s *Stitching) replaceDuck(ctx context.Context, r Replacement) error {
	tx, err := s.q.db().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	for lo := 0; lo < len(r.Delete); lo += maxInList {
		part := r.Delete[lo:min(lo+maxInList, len(r.Delete))]
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("DELETE FROM pageviews WHERE id IN (%s)", marks(len(part))), anys(part)...); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
	}
	if err := insertRowsDuck(ctx, tx, pvColSet(r)); err != nil {
		return fmt.Errorf("insert: %w", err)
	}
	if err := updateTxDuck(ctx, tx, r.Tx); err != nil {
		return fmt.Errorf("update transactions: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// duckRowsPerStatement bounds the rows (and so the values, at most
// maxInList*4) one multi-row statement binds.
const duckRowsPerStatement = 64

// insertRowsDuck inserts cs's rows as multi-row VALUES statements: inside
// a transaction, where the appender the writer uses is not.
func insertRowsDuck(ctx context.Context, tx *sql.Tx, cs *colSet) error {
	cols := cs.columns()
	row := "(" + marks(len(cols)) + ")"
	for lo := 0; lo < cs.n; lo += duckRowsPerStatement {
		hi := min(lo+duckRowsPerStatement, cs.n)
		args := make([]any, 0, (hi-lo)*len(cols))
		for i := lo; i < hi; i++ {
			for _, col := range cols {
				args = append(args, valueAt(col, i))
			}
		}
		q := fmt.Sprintf("INSERT INTO %s (%s) VALUES %s", cs.t.name, strings.Join(cs.t.names(), ", "),
			strings.TrimSuffix(strings.Repeat(row+", ", hi-lo), ", "))
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// updateTxDuck sets the transactions' pageview ids and flags, many per
// statement.
func updateTxDuck(ctx context.Context, tx *sql.Tx, set map[TxKey]TxUpdate) error {
	keys := make([]TxKey, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	for lo := 0; lo < len(keys); lo += maxInList {
		part := keys[lo:min(lo+maxInList, len(keys))]
		args := make([]any, 0, 5*len(part))
		for _, k := range part {
			args = append(args, k.Sensor, k.ID, k.Start, set[k].Pageview, uint32(set[k].Flags))
		}
		q := fmt.Sprintf(`UPDATE transactions SET pageview_id = v.pv, flags = v.flags
			FROM (VALUES %s) AS v(sensor, id, start_ns, pv, flags)
			WHERE transactions.sensor = v.sensor AND transactions.id = v.id AND transactions.start_ns = v.start_ns`,
			strings.TrimSuffix(strings.Repeat("(?, ?, ?::BIGINT, ?, ?::UINTEGER), ", len(part)), ", "))
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

// valueAt is row i of a column's typed slice.
func valueAt(col any, i int) any {
	switch v := col.(type) {
	case []int64:
		return v[i]
	case []int32:
		return v[i]
	case []uint32:
		return v[i]
	case []uint16:
		return v[i]
	case []string:
		return v[i]
	case []time.Time:
		return v[i]
	}
	panic(fmt.Sprintf("store: column type %T", col))
}

// replaceCH: a mutation affects only the parts that exist when it is
// submitted, so the delete is waited for before the insert, which it must
// not remove. Values are bound by the driver, never spliced.
func (s *Stitching) replaceCH(ctx context.Context, c *chBackend, r Replacement) error {
	var deleted []rowCheck
	for lo := 0; lo < len(r.Delete); lo += maxInList {
		part := r.Delete[lo:min(lo+maxInList, len(r.Delete))]
		if err := c.mutate(ctx, "ALTER TABLE "+c.mutable(pvTable.name)+" DELETE WHERE id IN ("+marks(len(part))+")", anys(part)...); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		deleted = append(deleted, c.deletedCheck(pvTable.name, part))
	}
	if len(r.Delete) > 0 {
		if err := s.waitMutations(ctx, c, pvTable.name, deleted); err != nil {
			return err
		}
	}
	if len(r.Pageviews) > 0 {
		// A re-run inserts the very block it deleted; replicated tables
		// would drop it as a duplicate of the first run's insert.
		nodedup := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"insert_deduplicate": 0}))
		if err := c.insert(nodedup, pvColSet(r)); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	keys := make([]TxKey, 0, len(r.Tx))
	for k := range r.Tx {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ID < keys[j].ID })
	var updated []rowCheck
	for lo := 0; lo < len(keys); lo += maxInList {
		part := keys[lo:min(lo+maxInList, len(keys))]
		ids, pvIDs, flags := make([]string, len(part)), make([]string, len(part)), make([]uint32, len(part))
		for i, k := range part {
			ids[i], pvIDs[i], flags[i] = k.ID, r.Tx[k].Pageview, uint32(r.Tx[k].Flags)
		}
		// transform maps each id to its pageview id and flags in one
		// mutation, so a row never has one without the other.
		q := fmt.Sprintf("ALTER TABLE %s UPDATE pageview_id = transform(id, ?, ?, pageview_id), flags = transform(id, ?, ?, flags) WHERE id IN (%s)",
			c.mutable(txTable.name), marks(len(ids)))
		if err := c.mutate(ctx, q, append([]any{ids, pvIDs, ids, flags}, anys(ids)...)...); err != nil {
			return fmt.Errorf("update transactions: %w", err)
		}
		updated = append(updated, c.updatedCheck(ids, pvIDs, flags))
	}
	if len(keys) > 0 {
		return s.waitMutations(ctx, c, txTable.name, updated)
	}
	return nil
}

// waitMutations waits until the table's mutations are done: on the
// server, or in cluster mode on every server, where checks must also read
// their effect (stitch_cluster.go).
func (s *Stitching) waitMutations(ctx context.Context, c *chBackend, table string, checks []rowCheck) error {
	if c.cluster != "" {
		return c.waitClusterMutations(ctx, table, checks)
	}
	for {
		var n uint64
		err := s.q.db().QueryRowContext(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND table = ? AND is_done = 0",
			c.db, table).Scan(&n)
		if err != nil {
			return fmt.Errorf("mutations of %s: %w", table, err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mutations of %s: %w", table, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Checkpoint is the newest time stored for a partition name; ok false
// when it has none.
func (s *Stitching) Checkpoint(ctx context.Context, name string) (t int64, ok bool, err error) {
	var n int64
	var newest sql.NullInt64
	err = s.q.db().QueryRowContext(ctx, fmt.Sprintf("SELECT count(*), max(start_ns) FROM %s WHERE id = ?",
		s.q.d.table(checkpointTable.name)), name).Scan(&n, &newest)
	if err != nil {
		return 0, false, fmt.Errorf("stitch: checkpoint %s: %w", name, err)
	}
	return newest.Int64, n > 0, nil
}

// SetCheckpoint records that name is stitched up to t.
func (s *Stitching) SetCheckpoint(ctx context.Context, name string, t int64) error {
	var err error
	if c := s.ch(); c != nil {
		cs := newColSet(checkpointTable, 1)
		cs.row(t, "", name)
		cs.Str("")
		cs.I64(t)
		cs.done()
		err = c.insert(ctx, cs)
	} else {
		_, err = s.q.db().ExecContext(ctx, "INSERT INTO stitch_checkpoints (day, sensor, id, class, start_ns) VALUES (?, '', ?, '', ?)",
			dayOf(t), name, t)
	}
	if err != nil {
		return fmt.Errorf("stitch: set checkpoint %s: %w", name, err)
	}
	return nil
}

// ErrNoStitching: the store is not one Open returned.
var ErrNoStitching = errors.New("store: no stitching access")

// retainedTables are the tables retention drops old days of: the
// checkpoints too, whose newest row of a partition is kept while its day
// is (a checkpoint older than the retention points into dropped data).
func retainedTables() []table {
	return append([]table{rollupTable, annotationTable, checkpointTable}, tables...)
}
