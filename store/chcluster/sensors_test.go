package chcluster_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chcluster"
	"github.com/rtmon/rtmon/store/storetest"
)

var recordTables = []string{"connections", "transactions", "pageviews"}

// openAll opens one store per URL at the same time (so that their schema
// migrations race) and closes them at cleanup.
func openAll(t *testing.T, urls []string, sensors []string) []store.Store {
	t.Helper()
	out := make([]store.Store, len(urls))
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = store.Open(context.Background(), urls[i], store.Options{Sensor: sensors[i], SpillDir: t.TempDir()})
		}()
	}
	wg.Wait()
	for i, s := range out {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("open %s: %v", urls[i], errs[i])
		}
	}
	return out
}

// Two sensors open one cluster database at once (through servers of
// different shards), write their own records concurrently, and a third
// store reads them all back: every record exactly once with its sensor,
// each on the shard its client hashes to, and both replicas of a shard
// holding the same.
func TestClusterTwoSensors(t *testing.T) {
	c := needCluster(t)
	ctx := context.Background()
	db := freshDB()
	stores := openAll(t, []string{c.URL(0, db), c.URL(2, db)}, []string{"sensor-a", "sensor-b"})

	ref := storetest.NewRef()
	want := map[string]map[string]string{} // table -> id -> sensor
	for _, tb := range recordTables {
		want[tb] = map[string]string{}
	}
	var batches [2][]store.Batch
	for i, seed := range []uint64{101, 202} {
		g := storetest.NewGen(seed, storetest.T0, int64(24*time.Hour)/4000)
		for range 4 {
			b := g.Next(500)
			batches[i] = append(batches[i], b)
			ref.Add(b)
			sensor := []string{"sensor-a", "sensor-b"}[i]
			for _, x := range b.Connections {
				addOnce(t, want["connections"], x.ID, sensor)
			}
			for _, x := range b.Transactions {
				addOnce(t, want["transactions"], x.ID, sensor)
			}
			for _, x := range b.Pageviews {
				addOnce(t, want["pageviews"], x.ID, sensor)
			}
		}
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range batches[i] {
				if err := s.WriteBatch(ctx, b); err != nil {
					errs[i] = err
					return
				}
			}
			errs[i] = s.Flush(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("sensor %d: %v", i, err)
		}
		if err := stores[i].Close(); err != nil {
			t.Fatal(err)
		}
	}

	reader := openAll(t, []string{c.URL(1, db)}, []string{"reader"})[0]
	all := store.TimeRange{From: storetest.T0 - int64(time.Hour)}
	syncReplicas(t, c, db)
	got, err := reader.Counters(ctx, all, "")
	if err != nil {
		t.Fatal(err)
	}
	if wantC := ref.Counters(all, ""); got != wantC {
		t.Fatalf("counters through a third store = %+v\nwant %+v", got, wantC)
	}
	for _, tb := range recordTables {
		checkIDs(t, c, 3, db, tb, want[tb])
		checkShards(t, c, db, tb, len(want[tb]))
	}
}

func addOnce(t *testing.T, m map[string]string, id, sensor string) {
	t.Helper()
	if _, dup := m[id]; dup {
		t.Fatalf("test data repeats id %s", id)
	}
	m[id] = sensor
}

// syncReplicas waits until every replica has fetched what its shard holds.
func syncReplicas(t *testing.T, c *chcluster.Cluster, db string) {
	t.Helper()
	for i := range c.Nodes {
		for _, tb := range recordTables {
			query(t, c, i, fmt.Sprintf("SYSTEM SYNC REPLICA `%s`.%s_local", db, tb))
		}
	}
}

// checkIDs reads a Distributed table's ids and sensors through server i:
// each id exactly once, with the sensor that wrote it.
func checkIDs(t *testing.T, c *chcluster.Cluster, i int, db, tb string, want map[string]string) {
	t.Helper()
	out := query(t, c, i, fmt.Sprintf("SELECT id, sensor, count() FROM `%s`.%s GROUP BY id, sensor", db, tb))
	got := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("%s: row %q", tb, line)
		}
		if f[2] != "1" {
			t.Errorf("%s: id %s stored %s times", tb, f[0], f[2])
		}
		if _, dup := got[f[0]]; dup {
			t.Errorf("%s: id %s stored under two sensors", tb, f[0])
		}
		got[f[0]] = f[1]
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d ids stored, want %d", tb, len(got), len(want))
	}
	for id, s := range want {
		if got[id] != s {
			t.Errorf("%s: id %s stored with sensor %q, want %q", tb, id, got[id], s)
		}
	}
}

// checkShards reads each server's local table: only rows whose client
// hashes to its shard, a share of the whole, the same on both replicas,
// and the shards' shares adding up to total.
func checkShards(t *testing.T, c *chcluster.Cluster, db, tb string, total int) {
	t.Helper()
	perShard := map[int]int{}
	for i, n := range c.Nodes {
		out := query(t, c, i, fmt.Sprintf("SELECT count(), countIf(cityHash64(client) %% %d != %d) FROM `%s`.%s_local",
			2, n.Shard-1, db, tb))
		f := strings.Fields(out)
		if len(f) != 2 {
			t.Fatalf("%s on s%dr%d: %q", tb, n.Shard, n.Replica, out)
		}
		cnt, _ := strconv.Atoi(f[0])
		if f[1] != "0" {
			t.Errorf("%s on s%dr%d: %s of %d rows belong to the other shard", tb, n.Shard, n.Replica, f[1], cnt)
		}
		if cnt == 0 || cnt == total {
			t.Errorf("%s on s%dr%d holds %d of %d rows, want a share", tb, n.Shard, n.Replica, cnt, total)
		}
		if prev, ok := perShard[n.Shard]; ok && prev != cnt {
			t.Errorf("%s: replicas of shard %d hold %d and %d rows", tb, n.Shard, prev, cnt)
		}
		perShard[n.Shard] = cnt
	}
	if perShard[1]+perShard[2] != total {
		t.Errorf("%s: shards hold %d + %d rows, want %d", tb, perShard[1], perShard[2], total)
	}
}

// schemaOf is a server's view of a database: tables with engines, columns
// with types.
func schemaOf(t *testing.T, c *chcluster.Cluster, i int, db string) string {
	t.Helper()
	tables := query(t, c, i, fmt.Sprintf("SELECT name, engine FROM system.tables WHERE database = '%s' ORDER BY name", db))
	cols := query(t, c, i, fmt.Sprintf("SELECT table, name, type FROM system.columns WHERE database = '%s' ORDER BY table, name", db))
	return tables + "\n" + cols
}

// lastDDLTask names the newest distributed DDL task (sequential names;
// the count could shrink as the queue is cleaned).
func lastDDLTask(t *testing.T, c *chcluster.Cluster) string {
	return query(t, c, 0, "SELECT max(name) FROM system.zookeeper WHERE path = '/clickhouse/task_queue/ddl'")
}

func versions(t *testing.T, c *chcluster.Cluster, i int, db string) string {
	return query(t, c, i, fmt.Sprintf("SELECT groupArray(version) FROM (SELECT version FROM `%s`.schema_migrations ORDER BY version)", db))
}

// A fresh database is laid out the same on every server; opening it again
// (through another server) changes nothing and issues no DDL, so it also
// opens while a replica is down.
func TestClusterReopenIdempotent(t *testing.T) {
	c := needCluster(t)
	db := freshDB()
	s := openAll(t, []string{c.URL(0, db)}, []string{"a"})[0]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	first := schemaOf(t, c, 0, db)
	for _, want := range []string{"connections\tDistributed", "connections_local\tReplicatedReplacingMergeTree",
		"rollups_local\tReplicatedReplacingMergeTree", "annotations_local\tReplicatedMergeTree", "schema_migrations\tReplicatedMergeTree"} {
		if !strings.Contains(first, want) {
			t.Errorf("schema lacks %q:\n%s", want, first)
		}
	}
	waitFor(t, "schema versions replicated", func() (bool, string) {
		v := versions(t, c, 3, db)
		return v == versions(t, c, 0, db), v
	})
	for i := range c.Nodes {
		if got := schemaOf(t, c, i, db); got != first {
			t.Errorf("server %d schema differs:\n%s\nwant\n%s", i, got, first)
		}
	}
	vers, task := versions(t, c, 0, db), lastDDLTask(t, c)

	c.StopNode(1)
	t.Cleanup(func() {
		if !c.Nodes[1].Running() {
			c.StartNode(context.Background(), 1)
		}
	})
	s = openAll(t, []string{c.URL(3, db)}, []string{"b"})[0]
	g := storetest.NewGen(5, storetest.T0, int64(time.Second))
	if err := s.WriteBatch(context.Background(), g.Next(100)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("write with a replica down: %v", err)
	}
	if err := c.StartNode(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitReady(context.Background(), 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := lastDDLTask(t, c); got != task || task == "" {
		t.Errorf("reopening issued DDL: newest task %s, was %s", got, task)
	}
	if got := versions(t, c, 3, db); got != vers {
		t.Errorf("reopening recorded versions %s, were %s", got, vers)
	}
	for i := range c.Nodes {
		if got := schemaOf(t, c, i, db); got != first {
			t.Errorf("server %d schema after reopen:\n%s\nwant\n%s", i, got, first)
		}
	}
}

// A cluster database of schema version 2 (local tables without the
// columns of versions 3-5; the Distributed tables gone, as after a
// migration that stopped half way; rollups one row per minute and class
// for all sensors, as before version 9) migrates on Open: every server
// ends with the fresh layout, an old row reads back with zeros, and the
// old rollup rows are gone.
func TestClusterMigration(t *testing.T) {
	c := needCluster(t)
	ctx := context.Background()
	db, fresh := freshDB(), freshDB()
	for _, d := range []string{db, fresh} {
		if err := openAll(t, []string{c.URL(0, d)}, []string{"a"})[0].Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Version 2 ended each record table at flags: drop what came after.
	for _, tb := range recordTables {
		cols := strings.Split(query(t, c, 0, fmt.Sprintf("SELECT name FROM system.columns WHERE database = '%s' AND table = '%s_local'", db, tb)), "\n")
		at := slices.Index(cols, "flags")
		if at < 0 || at == len(cols)-1 {
			t.Fatalf("%s columns %v: nothing after flags", tb, cols)
		}
		for j := len(cols) - 1; j > at; j-- {
			query(t, c, 0, fmt.Sprintf("ALTER TABLE `%s`.%s_local ON CLUSTER rtmon DROP COLUMN %s", db, tb, cols[j]))
		}
		query(t, c, 0, fmt.Sprintf("DROP TABLE `%s`.%s ON CLUSTER rtmon", db, tb))
	}
	oldRollups := "day Date, kind String, minute Int64, class String, version Int64, n Int64, first_ns Int64, last_ns Int64, lo Int64, hi Int64, sums String, hist String"
	for _, q := range []string{
		fmt.Sprintf("DROP TABLE `%s`.rollups ON CLUSTER rtmon", db),
		fmt.Sprintf("DROP TABLE `%s`.rollups_local ON CLUSTER rtmon", db),
		fmt.Sprintf("CREATE TABLE `%[1]s`.rollups_local ON CLUSTER rtmon (%[2]s) ENGINE = ReplicatedReplacingMergeTree("+
			"'/clickhouse/tables/{shard}/%[1]s/rollups_local', '{replica}', version) PARTITION BY toYYYYMMDD(day) ORDER BY (kind, minute, class)", db, oldRollups),
		fmt.Sprintf("CREATE TABLE `%[1]s`.rollups ON CLUSTER rtmon (%[2]s) ENGINE = Distributed(rtmon, %[1]s, rollups_local, cityHash64(kind, minute, class))", db, oldRollups),
		fmt.Sprintf("INSERT INTO `%s`.rollups_local (day, kind, minute, class, version, n, first_ns, last_ns, lo, hi, sums, hist) "+
			"VALUES ('2026-11-28', 'tx', %d, 'c', 1, 1000, 0, 0, 0, 0, '', '')", db, storetest.T0),
	} {
		query(t, c, 0, q)
	}
	// Whatever the version of this rtmon, the database is now at 2.
	query(t, c, 0, fmt.Sprintf("ALTER TABLE `%s`.schema_migrations DELETE WHERE version >= 3", db))
	for i := range c.Nodes {
		waitFor(t, "version table back at 2", func() (bool, string) {
			v := versions(t, c, i, db)
			return v == "[1,2]", v
		})
	}
	start := storetest.T0 + int64(time.Hour)
	query(t, c, 0, fmt.Sprintf("INSERT INTO `%s`.pageviews_local (day, id, client, class, host, url, status, start_ns, end_ns, total) "+
		"VALUES ('2026-11-28', 'oldpv', '', 'c', 'h', '/old', 200, %d, %d, 1)", db, start, start+1))

	s := openAll(t, []string{c.URL(2, db)}, []string{"a"})[0]
	pv, err := s.PageviewByID(ctx, "oldpv")
	if err != nil {
		t.Fatal(err)
	}
	if pv.Pageview.URL != "/old" || pv.Pageview.AfterLoad != 0 || pv.Pageview.Evidence != "" {
		t.Errorf("old pageview read back as %+v", pv.Pageview)
	}
	want := schemaOf(t, c, 0, fresh)
	for i := range c.Nodes {
		got := strings.ReplaceAll(schemaOf(t, c, i, db), db, fresh)
		if got != want {
			t.Errorf("server %d after migration:\n%s\nwant\n%s", i, got, want)
		}
	}
	for i := range c.Nodes {
		if n := query(t, c, i, fmt.Sprintf("SELECT count() FROM `%s`.rollups_local WHERE n = 1000", db)); n != "0" {
			t.Errorf("server %d: %s old rollup rows after migration, want 0", i, n)
		}
	}
	if freshV := versions(t, c, 0, fresh); versions(t, c, 2, db) != freshV {
		t.Errorf("versions after migration %s, fresh database has %s", versions(t, c, 2, db), freshV)
	}
}
