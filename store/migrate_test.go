package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chtest"
	"github.com/rtmon/rtmon/store/storetest"
)

// oldPageviewColumns is the pageviews table of schema version 2.
const oldPageviewColumns = "day, sensor, id, iface, client, user_agent, class, priority, server, host, url, status, " +
	"container_id, start_ns, end_ns, total, tconn, tserver, ttransfer, tother, objects, connections, bytes, " +
	"syn_losses, synack_losses, retrans_bytes, flags"

// A store written by schema version 2 (pageviews without after_load,
// redirects and evidence, transactions without request_acked) opens with
// the new one: the columns are added, old rows read back with zeros, new
// rows with their values.
func TestMigrationAddsPageviewColumns(t *testing.T) {
	ctx := context.Background()
	start := storetest.T0 + int64(time.Hour)
	t.Run("duckdb", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "old.duckdb")
		checkMigration(t, "duckdb:"+path, func() {
			execDuck(t, path, []string{
				"ALTER TABLE pageviews DROP COLUMN declared",
				"ALTER TABLE pageviews DROP COLUMN sensors",
				"ALTER TABLE pageviews DROP COLUMN evidence",
				"ALTER TABLE pageviews DROP COLUMN redirects",
				"ALTER TABLE pageviews DROP COLUMN after_load",
				"ALTER TABLE transactions DROP COLUMN sec_fetch_dest",
				"ALTER TABLE transactions DROP COLUMN location",
				"ALTER TABLE transactions DROP COLUMN ttls",
				"ALTER TABLE transactions DROP COLUMN request_acked",
				"ALTER TABLE connections DROP COLUMN ttls",
				"ALTER TABLE connections DROP COLUMN alpn",
				"ALTER TABLE connections DROP COLUMN sni",
				"ALTER TABLE connections DROP COLUMN tls_version",
				"DELETE FROM schema_migrations WHERE version >= 3",
				fmt.Sprintf("INSERT INTO pageviews (%s) VALUES ('2026-01-01', '', 'oldpv', 0, '', '', 'c', '', '', 'h', '/old', 200, '', %d, %d, 1, 0, 0, 0, 1, 2, 1, 10, 0, 0, 0, 0)",
					oldPageviewColumns, start, start+1),
			})
		})
	})
	t.Run("clickhouse", func(t *testing.T) {
		srv := needCH(t)
		db := freshDB()
		checkMigration(t, srv.URL(db), func() {
			conn := openCH(t, srv)
			execCH(t, conn, []string{
				fmt.Sprintf("ALTER TABLE `%s`.pageviews DROP COLUMN declared", db),
				fmt.Sprintf("ALTER TABLE `%s`.pageviews DROP COLUMN sensors", db),
				fmt.Sprintf("ALTER TABLE `%s`.pageviews DROP COLUMN evidence", db),
				fmt.Sprintf("ALTER TABLE `%s`.pageviews DROP COLUMN redirects", db),
				fmt.Sprintf("ALTER TABLE `%s`.pageviews DROP COLUMN after_load", db),
				fmt.Sprintf("ALTER TABLE `%s`.transactions DROP COLUMN sec_fetch_dest", db),
				fmt.Sprintf("ALTER TABLE `%s`.transactions DROP COLUMN location", db),
				fmt.Sprintf("ALTER TABLE `%s`.transactions DROP COLUMN ttls", db),
				fmt.Sprintf("ALTER TABLE `%s`.transactions DROP COLUMN request_acked", db),
				fmt.Sprintf("ALTER TABLE `%s`.connections DROP COLUMN ttls", db),
				fmt.Sprintf("ALTER TABLE `%s`.connections DROP COLUMN alpn", db),
				fmt.Sprintf("ALTER TABLE `%s`.connections DROP COLUMN sni", db),
				fmt.Sprintf("ALTER TABLE `%s`.connections DROP COLUMN tls_version", db),
			})
			chSchemaAt(t, conn, db, 2)
			b, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO `%s`.pageviews (%s)", db, oldPageviewColumns))
			if err != nil {
				t.Fatal(err)
			}
			day := time.Unix(0, start).UTC().Truncate(24 * time.Hour)
			if err := b.Append(day, "", "oldpv", int32(0), "", "", "c", "", "", "h", "/old", uint16(200), "", start, start+1,
				int64(1), int64(0), int64(0), int64(0), int64(1), int32(2), int32(1), int64(10), int32(0), int32(0), int64(0), uint32(0)); err != nil {
				t.Fatal(err)
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// checkMigration creates a store at url, lets downgrade turn it into a
// version-2 store holding pageview "oldpv", reopens it and checks both old
// and new rows.
func checkMigration(t *testing.T, url string, downgrade func()) {
	ctx := context.Background()
	s, err := store.Open(ctx, url, store.Options{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	downgrade()
	s, err = store.Open(ctx, url, store.Options{SpillDir: t.TempDir()})
	if err != nil {
		t.Fatalf("open the old store: %v", err)
	}
	defer s.Close()
	got, err := s.PageviewByID(ctx, "oldpv")
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Pageview; p.AfterLoad != 0 || p.Redirects != 0 || p.Evidence != "" || p.Objects != 2 || len(p.Sensors) != 0 || p.Declared != "" {
		t.Errorf("old row %+v", p)
	}
	b := storetest.NewGen(3, storetest.T0, 1e6).Next(20)
	if len(b.Pageviews) == 0 {
		t.Fatal("generator made no pageviews")
	}
	p := b.Pageviews[0]
	var txs []*reconstruct.Transaction
	for _, tx := range b.Transactions {
		if tx.PageviewID == p.ID {
			tx.PageviewID = "newpv"
			txs = append(txs, tx)
		}
	}
	p.ID, p.AfterLoad, p.Redirects, p.Evidence = "newpv", 3, 1, "html"
	p.Declared = "AQEAAAAAAAAAAQ" // schema 8: one blocking key

	// Schema 5: a TLS connection's handshake on it and its first transaction.
	txs[0].Ttls = 7e6
	txs[0].Total += txs[0].Ttls
	txs[0].End += txs[0].Ttls
	var conns []*reconstruct.Connection
	for _, c := range b.Connections {
		if c.ID == txs[0].ConnectionID {
			c.TLSVersion, c.SNI, c.ALPN, c.Ttls = 0x0304, "shop.example.test", "http/1.1", 7e6
			conns = append(conns, c)
		}
	}
	if err := s.WriteBatch(ctx, store.Batch{Pageviews: b.Pageviews[:1], Transactions: txs, Connections: conns}); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = s.PageviewByID(ctx, "newpv")
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Pageview; p.AfterLoad != 3 || p.Redirects != 1 || p.Evidence != "html" || p.Declared != "AQEAAAAAAAAAAQ" {
		t.Errorf("new row %+v", p)
	}
	if len(got.Transactions) != len(txs) || len(txs) == 0 {
		t.Fatalf("%d transactions read back, %d written", len(got.Transactions), len(txs))
	}
	want := map[string]int64{}
	for _, tx := range txs {
		want[tx.ID] = tx.RequestAcked
	}
	for _, tx := range got.Transactions {
		if tx.RequestAcked == 0 || tx.RequestAcked != want[tx.ID] {
			t.Errorf("transaction %s: request acked %d, written %d", tx.ID, tx.RequestAcked, want[tx.ID])
		}
		if wantTLS := map[bool]int64{true: 7e6}[tx.ID == txs[0].ID]; tx.Ttls != wantTLS {
			t.Errorf("transaction %s: ttls %d, want %d", tx.ID, tx.Ttls, wantTLS)
		}
	}
	if len(conns) != 1 {
		t.Fatalf("the generator's batch lacks connection %s", txs[0].ConnectionID)
	}
	var found bool
	for _, c := range got.Connections {
		if c.ID == conns[0].ID {
			found = true
			if c.TLSVersion != 0x0304 || c.SNI != "shop.example.test" || c.ALPN != "http/1.1" || c.Ttls != 7e6 {
				t.Errorf("connection %s read back with tls %#x %q %q %d", c.ID, c.TLSVersion, c.SNI, c.ALPN, c.Ttls)
			}
		}
	}
	if !found {
		t.Errorf("connection %s not read back with its pageview (%d connections)", conns[0].ID, len(got.Connections))
	}
}

// oldRollupColumns is the rollups table before schema 9 (no sensor in its
// key), with ClickHouse's and DuckDB's types.
const oldRollupColumns = "day %[1]s, kind %[2]s, minute %[3]s, class %[2]s, version %[3]s, n %[3]s, first_ns %[3]s, last_ns %[3]s, " +
	"lo %[3]s, hi %[3]s, sums %[2]s, hist %[2]s"

// A store whose rollups table has the layout before schema 9 (one row per
// minute and class for every sensor) opens with the table made again per
// sensor: the old rows are gone (one claims 1,000 records that do not
// exist), readers recompute the minutes once, and the writer's rows then
// answer alone.
func TestMigrationRemakesRollups(t *testing.T) {
	ctx := context.Background()
	t.Run("duckdb", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "old.duckdb")
		checkRollupMigration(t, "duckdb:"+path, func() {
			execDuck(t, path, []string{
				"DROP TABLE rollups",
				"CREATE TABLE rollups (" + fmt.Sprintf(oldRollupColumns, "DATE NOT NULL", "VARCHAR NOT NULL", "BIGINT NOT NULL") + ")",
				fmt.Sprintf("INSERT INTO rollups (day, kind, minute, class, version, n, first_ns, last_ns, lo, hi, sums, hist) "+
					"VALUES ('2026-11-28', 'tx', %d, 'gold', 1, 1000, %d, %d, 1, 1, '', '')", storetest.T0, storetest.T0, storetest.T0),
				"DELETE FROM schema_migrations WHERE version >= 9",
			})
		})
	})
	t.Run("clickhouse", func(t *testing.T) {
		srv := needCH(t)
		db := freshDB()
		checkRollupMigration(t, srv.URL(db), func() {
			conn := openCH(t, srv)
			execCH(t, conn, []string{
				fmt.Sprintf("DROP TABLE `%s`.rollups", db),
				fmt.Sprintf("CREATE TABLE `%s`.rollups (%s) ENGINE = ReplacingMergeTree(version) PARTITION BY toYYYYMMDD(day) ORDER BY (kind, minute, class)",
					db, fmt.Sprintf(oldRollupColumns, "Date", "String", "Int64")),
			})
			chSchemaAt(t, conn, db, 8)
			// An INSERT with VALUES hangs 18.16 over the native protocol:
			// the old row goes as a batch.
			b, err := conn.PrepareBatch(ctx, fmt.Sprintf("INSERT INTO `%s`.rollups (day, kind, minute, class, version, n, first_ns, last_ns, lo, hi, sums, hist)", db))
			if err != nil {
				t.Fatal(err)
			}
			t0 := storetest.T0
			if err := b.Append(time.Unix(0, t0).UTC(), "tx", t0, "gold", int64(1), int64(1000), t0, t0, int64(1), int64(1), "", ""); err != nil {
				t.Fatal(err)
			}
			if err := b.Send(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func checkRollupMigration(t *testing.T, url string, downgrade func()) {
	ctx := context.Background()
	opts := store.Options{Sensor: "fe1", Rollups: "on", SpillDir: t.TempDir()}
	s, err := store.Open(ctx, url, opts)
	if err != nil {
		t.Fatal(err)
	}
	gen := storetest.NewGen(9, storetest.T0, int64(100*time.Millisecond))
	if err := s.WriteBatch(ctx, gen.Next(300)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	downgrade()
	if s, err = store.Open(ctx, url, opts); err != nil {
		t.Fatalf("open the old store: %v", err)
	}
	defer s.Close()
	all := store.TimeRange{From: storetest.T0, To: storetest.T0 + int64(time.Hour)}
	raw, err := s.Counters(ctx, all, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, wantRecomputed := range []bool{true, false} {
		sum, err := s.Summary(ctx, store.SummaryQuery{Range: all, Sensor: "fe1"})
		if err != nil {
			t.Fatalf("summary %d: %v", i, err)
		}
		if sum.Counters != raw {
			t.Errorf("summary %d: counters %+v\nwant the records' %+v", i, sum.Counters, raw)
		}
		if (sum.Recomputed > 0) != wantRecomputed {
			t.Errorf("summary %d: %d minutes recomputed, want some: %v", i, sum.Recomputed, wantRecomputed)
		}
	}
	// The writer keeps the new table: another batch's minutes are rolled
	// up by it, not by the reader.
	if err := s.WriteBatch(ctx, gen.Next(300)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	raw, err = s.Counters(ctx, all, "")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Summary(ctx, store.SummaryQuery{Range: all})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counters != raw || sum.Recomputed != 0 {
		t.Errorf("after a new batch: counters %+v (%d minutes recomputed)\nwant the records' %+v, none recomputed", sum.Counters, sum.Recomputed, raw)
	}
}

// execDuck runs qs on the DuckDB database at path.
func execDuck(t *testing.T, path string, qs []string) {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range qs {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// openCH connects to srv natively, closed when the test ends.
func openCH(t *testing.T, srv *chtest.Server) clickhouse.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// execCH runs qs on conn.
func execCH(t *testing.T, conn clickhouse.Conn, qs []string) {
	t.Helper()
	for _, q := range qs {
		if err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// chSchemaAt makes db's schema version last: its TinyLog version table
// has no DELETE, so it is made again holding 1..last.
func chSchemaAt(t *testing.T, conn clickhouse.Conn, db string, last uint32) {
	t.Helper()
	execCH(t, conn, []string{
		fmt.Sprintf("DROP TABLE `%s`.schema_migrations", db),
		fmt.Sprintf("CREATE TABLE `%s`.schema_migrations (version UInt32, applied DateTime) ENGINE = TinyLog", db),
	})
	b, err := conn.PrepareBatch(context.Background(), fmt.Sprintf("INSERT INTO `%s`.schema_migrations (version, applied)", db))
	if err != nil {
		t.Fatal(err)
	}
	for v := uint32(1); v <= last; v++ {
		if err := b.Append(v, time.Now().UTC().Truncate(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}
