package store

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	chdriver "github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// chBackend is a ClickHouse database reached over the native protocol:
// conn for inserts and DDL, sdb (database/sql over the same driver) for
// queries. Every statement names the database.
type chBackend struct {
	host string
	conn chdriver.Conn
	sdb  *sql.DB
	db   string
	// cluster: the remote_servers cluster of cluster mode ("": one
	// server); see clickhouse_cluster.go.
	cluster string
	// dsn reaches the server without ?cluster; cluster mode opens it
	// at each server of the cluster (stitch_cluster.go).
	dsn string
}

// insert sends one INSERT per table, as native-protocol blocks of
// chBlockRows rows. The column list is explicit: 18.16 rejects the
// driver's implicit form. Values are appended column-wise (no per-row
// reflection). Flushing a block resets the driver's column buffers but keeps
// their capacity, so one batch reuses them instead of growing every column
// to the whole batch by doubling: that garbage was two thirds of the client's
// allocations and most of its GC. The server squashes the blocks of one
// INSERT back into large parts (min_insert_block_size_rows), and starts
// parsing the first block while the next is encoded.
func (c *chBackend) insert(ctx context.Context, cs *colSet) error {
	return insertCH(ctx, c.conn, c.db, cs.t.name, cs)
}

// insertCH inserts cs into db.name over conn (name: cs's table, or in
// cluster mode its shard-local table).
func insertCH(ctx context.Context, conn chdriver.Conn, db, name string, cs *colSet) error {
	t := cs.t
	b, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO `%s`.%s (%s)", db, name, strings.Join(t.names(), ", ")))
	if err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	defer b.Abort()
	cols := cs.columns()
	for lo := 0; lo < cs.n; lo += chBlockRows {
		hi := min(lo+chBlockRows, cs.n)
		for i, col := range cols {
			if err := b.Column(i).Append(sliceColumn(col, lo, hi)); err != nil {
				return fmt.Errorf("column %s: %w", t.cols[i].name, err)
			}
		}
		if hi < cs.n {
			if err := b.Flush(); err != nil {
				return fmt.Errorf("send block: %w", err)
			}
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}

// chBlockRows: big enough that per-block overhead is negligible, small
// enough that the reused buffers stay in the CPU caches' neighbourhood.
const chBlockRows = 16384

func sliceColumn(col any, lo, hi int) any {
	switch v := col.(type) {
	case []int64:
		return v[lo:hi]
	case []int32:
		return v[lo:hi]
	case []uint32:
		return v[lo:hi]
	case []uint16:
		return v[lo:hi]
	case []string:
		return v[lo:hi]
	case []time.Time:
		return v[lo:hi]
	case [][]int64:
		return v[lo:hi]
	}
	panic(fmt.Sprintf("store: column type %T", col))
}

// chunkRows: one insert per table and batch. Splitting a 100k batch into
// 34k-row inserts used both cores for encoding, but the server's CPU (part
// writes and the merges of the many small parts) is the larger share on a
// 2-core box: one 300k-record batch in three parallel inserts measured
// ~25% less total CPU and 10-30% more throughput.
func (c *chBackend) chunkRows(n int) int { return 0 }

// granule: none; a ClickHouse insert is one part whatever its size.
func (c *chBackend) granule() int { return 0 }

func chDDL(db string, t table) string {
	engine, args, keys := chLayout(t)
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.%s (%s) ENGINE = %s(%s) %s", db, t.name, columnDefs(t, chTypes, ""), engine, args, keys)
}

// chLayout is how t is stored: its MergeTree-family engine, the engine's
// arguments, and its partitioning and order. Cluster mode (clickhouse_cluster.go)
// keeps the same under the engine's Replicated variant.
func chLayout(t table) (engine, args, keys string) {
	if t.name == rollupTable.name {
		// The newest recompute of a (kind, minute, class, sensor) replaces
		// the older ones at merges; readers keep the newest meanwhile.
		return "ReplacingMergeTree", "version", "PARTITION BY toYYYYMMDD(day) ORDER BY (kind, minute, class, sensor)"
	}
	if t.name == annotationTable.name {
		// Read by time range only; a plain MergeTree keeps every row.
		return "MergeTree", "", "PARTITION BY toYYYYMMDD(day) ORDER BY (time_ms, id)"
	}
	// Partitioned by day for cheap retention; ordered by class then time,
	// the filter of every dashboard query; id last so ReplacingMergeTree
	// collapses exact duplicates (the writer's dedup makes that rare).
	return "ReplacingMergeTree", "", "PARTITION BY toYYYYMMDD(day) ORDER BY (class, start_ns, id)"
}

// connectClickHouse parses a clickhouse:// URL and checks the server
// answers within timeout.
func connectClickHouse(ctx context.Context, rawURL string, timeout time.Duration) (*chBackend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store url %q: %w", rawURL, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("store url %q: no host (want clickhouse://host:9000/db)", rawURL)
	}
	db := strings.Trim(u.Path, "/")
	if db == "" {
		db = "rtmon"
	}
	if !identRe.MatchString(db) {
		return nil, fmt.Errorf("store url %q: database name %q must match %s", rawURL, db, identRe)
	}
	// ?cluster=NAME is ours, not a server setting: taken out before the
	// driver reads the rest.
	cluster, dsn, err := clusterOption(rawURL, u)
	if err != nil {
		return nil, fmt.Errorf("store url %q: %w", rawURL, err)
	}
	chOpts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store url %q: %w", rawURL, err)
	}
	if cluster != "" {
		clusterSettings(chOpts)
	}
	// Connect to "default" first: the database may not exist yet. All
	// statements name the database explicitly.
	chOpts.Auth.Database = "default"
	if chOpts.DialTimeout == 0 || chOpts.DialTimeout > timeout {
		chOpts.DialTimeout = timeout
	}
	conn, err := clickhouse.Open(chOpts)
	if err != nil {
		return nil, fmt.Errorf("clickhouse %s: %w", u.Host, err)
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	err = conn.Ping(pctx)
	cancel()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("clickhouse at %s unreachable: %w", u.Host, err)
	}
	sdb := clickhouse.OpenDB(chOpts)
	sdb.SetMaxOpenConns(8)
	return &chBackend{host: u.Host, conn: conn, sdb: sdb, db: db, cluster: cluster, dsn: dsn}, nil
}

func (c *chBackend) String() string   { return "clickhouse " + c.host + "/" + c.db }
func (c *chBackend) sqlDB() *sql.DB   { return c.sdb }
func (c *chBackend) dialect() dialect { return chDialect(c.db) }

// batchRows keeps batches within 10k-600k records: smaller means too many
// parts for MergeTree (part files and their merges cost more server CPU
// than the inserts: a third of the server's time went to ext4 inode work),
// larger means too much to hold and resend after a failure. With the blocks
// streamed (insert), 600k measured 5.5 s of server CPU per 2M transactions
// against 6-7 s at 300k.
func (c *chBackend) batchRows(requested int) int {
	if requested <= 0 {
		return 600000
	}
	return min(max(requested, 10000), 600000)
}

// spillDir: a server can go away, so batches spill by default, to a
// directory of this database's own under the user's cache directory (not
// a shared /tmp, where another user could create it first).
func (c *chBackend) spillDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "rtmon", "spill", strings.NewReplacer(":", "_", "/", "_").Replace(c.host)+"_"+c.db)
}

func (c *chBackend) hangs() bool { return true }

func (c *chBackend) prepareSchema(ctx context.Context) error {
	if c.cluster != "" {
		return c.clusterPrepareSchema(ctx)
	}
	if err := c.conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE IF NOT EXISTS `%s`", c.db)); err != nil {
		return fmt.Errorf("create database %s: %w", c.db, err)
	}
	if err := c.conn.Exec(ctx, fmt.Sprintf("CREATE TABLE IF NOT EXISTS `%s`.schema_migrations (version UInt32, applied DateTime) ENGINE = TinyLog", c.db)); err != nil {
		return fmt.Errorf("schema_migrations: %w", err)
	}
	return nil
}

func (c *chBackend) createTable(ctx context.Context, t table) error {
	if c.cluster != "" {
		return c.clusterCreateTable(ctx, t)
	}
	return c.conn.Exec(ctx, chDDL(c.db, t))
}

func (c *chBackend) dropTable(ctx context.Context, name string) error {
	if c.cluster != "" {
		return c.clusterDropTable(ctx, name)
	}
	return c.conn.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS `%s`.%s", c.db, name))
}

func (c *chBackend) addColumn(ctx context.Context, t table, col column) error {
	if c.cluster != "" {
		return c.clusterAddColumn(ctx, t, col)
	}
	return c.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE `%s`.%s ADD COLUMN %s %s DEFAULT %s", c.db, t.name, col.name, chTypes[col.kind], zeroOf(col.kind)))
}

func (c *chBackend) schemaVersion(ctx context.Context) (int, error) {
	var v uint32
	err := c.sdb.QueryRowContext(ctx, fmt.Sprintf("SELECT max(version) FROM `%s`.schema_migrations", c.db)).Scan(&v)
	return int(v), err
}

func (c *chBackend) recordVersion(ctx context.Context, v int) error {
	b, err := c.conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO `%s`.schema_migrations (version, applied)", c.db))
	if err != nil {
		return err
	}
	if err := b.Append(uint32(v), time.Now().UTC().Truncate(time.Second)); err != nil {
		b.Abort()
		return err
	}
	return b.Send()
}

var partitionRe = regexp.MustCompile(`^[0-9]{8}$`)

// dropDaysBefore drops whole expired day partitions: 18.16 has no table TTL.
func (c *chBackend) dropDaysBefore(ctx context.Context, cutoff time.Time) error {
	if c.cluster != "" {
		return c.clusterDropDaysBefore(ctx, cutoff)
	}
	lim := cutoff.Format("20060102")
	for _, t := range retainedTables() {
		parts, err := queryStrings(ctx, c.sdb, "SELECT DISTINCT partition FROM system.parts WHERE database = ? AND table = ? AND active AND partition < ?", c.db, t.name, lim)
		if err != nil {
			return fmt.Errorf("list partitions of %s: %w", t.name, err)
		}
		for _, p := range parts {
			if !partitionRe.MatchString(p) {
				continue
			}
			if err := c.conn.Exec(ctx, fmt.Sprintf("ALTER TABLE `%s`.%s DROP PARTITION %s", c.db, t.name, p)); err != nil {
				return fmt.Errorf("drop partition %s of %s: %w", p, t.name, err)
			}
		}
	}
	return nil
}

func (c *chBackend) connections() []io.Closer { return []io.Closer{c.sdb, c.conn} }

// columnsQuery: system.columns lists a table's columns in table order.
func (c *chBackend) columnsQuery(name string) (string, []any) {
	return "SELECT name FROM system.columns WHERE database = ? AND table = ?", []any{c.db, name}
}
