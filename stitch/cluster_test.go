package stitch

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chcluster"
)

// TestStitchCluster runs the stitching on a ClickHouse cluster store (2
// shards x 2 replicas, 18.16 here): two sensors write their parts of every
// client's connections through servers of different shards; after one run
// the Distributed tables hold exactly the pageviews one sensor seeing
// everything makes, each stored once, on its client's shard, the same on
// both replicas; a second run changes nothing, on any server.
func TestStitchCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// The servers' logs stay for a look when the test fails.
	dir, err := os.MkdirTemp("", "rtmon-stitch-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	c, err := chcluster.Start(ctx, dir, chcluster.Options{})
	if err != nil {
		t.Fatalf("clickhouse test cluster: %v", err)
	}
	t.Cleanup(c.Stop)
	const db = "rtmon_stitch"

	items := synthItems(t, browsing)
	ref := newReference(items)
	if n := ref.stitchedCount(); n < 10 {
		t.Fatalf("only %d of %d pageviews span both sensors: the split tests little", n, len(ref.pvs))
	}
	writeSensorsAt(t, map[string]string{"fe-a": c.URL(0, db), "fe-b": c.URL(2, db)}, items)
	syncReplicas(t, c, db)
	reader := openClusterStore(t, c.URL(1, db))
	r := store.TimeRange{From: ref.from - int64(time.Minute), To: ref.to + int64(time.Minute)}
	if before := readSnapshot(t, reader, r); before.n == len(ref.pvs) && reflect.DeepEqual(before.members(), ref.members) {
		t.Fatal("the sensors' own pageviews already equal the reference: nothing to stitch")
	}

	st := openClusterStore(t, c.URL(3, db))
	stats := runHeldReplica(t, c, db, st, ref.config())
	if stats.Stitched != ref.stitchedCount() {
		t.Errorf("stitched %d pageviews, %d span both sensors", stats.Stitched, ref.stitchedCount())
	}
	// Before any replica syncs: the update mutations were waited for on
	// every server, so each replica's transactions already name the
	// reference's pageviews.
	checkTxPageviews(t, c, db, ref)
	syncReplicas(t, c, db)
	first := readSnapshot(t, reader, r)
	ref.check(t, first)
	firstLocal := checkLocal(t, c, db, len(ref.pvs))
	t.Logf("%d pageviews, %d across both sensors; stats %+v", len(ref.pvs), ref.stitchedCount(), stats)

	cfg := ref.config()
	cfg.From = 0 // resumes from the checkpoint: nothing left
	if again := run(t, st, cfg); again.Resumed != stats.Done || again.Windows != 0 {
		t.Errorf("resumed run: %+v, want resumed at %d with nothing to do", again, stats.Done)
	}
	cfg = ref.config()
	cfg.IgnoreCheckpoint = true
	again := run(t, st, cfg)
	if again.Stitched != stats.Stitched || again.Written != stats.Written {
		t.Errorf("second run stitched %d wrote %d, first %d %d", again.Stitched, again.Written, stats.Stitched, stats.Written)
	}
	syncReplicas(t, c, db)
	if second := readSnapshot(t, reader, r); !reflect.DeepEqual(first, second) {
		t.Errorf("a second run changed the store: %d pageviews, then %d", first.n, second.n)
	}
	if secondLocal := checkLocal(t, c, db, len(ref.pvs)); !reflect.DeepEqual(firstLocal, secondLocal) {
		t.Error("a second run changed a server's local tables")
	}
	checkCheckpointRetention(t, c.URL(1, db))
}

// writeSensorsAt stores each sensor's own records and pageviews through
// the store URL given for it, as each sensor's pipeline does.
func writeSensorsAt(t *testing.T, urls map[string]string, items []item) {
	t.Helper()
	per := map[string][]item{}
	for _, it := range copyItems(items) {
		per[sensorOf(it.connID())] = append(per[sensorOf(it.connID())], it)
	}
	for sensor, url := range urls {
		if len(per[sensor]) == 0 {
			t.Fatalf("sensor %s saw nothing", sensor)
		}
		st, err := store.Open(context.Background(), url, store.Options{Sensor: sensor, SpillDir: "-"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.WriteBatch(context.Background(), group(per[sensor])); err != nil {
			st.Close()
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func openClusterStore(t *testing.T, url string) store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url, store.Options{SpillDir: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func clusterQuery(t *testing.T, c *chcluster.Cluster, i int, sql string) string {
	t.Helper()
	out, err := c.Query(context.Background(), i, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return strings.TrimSpace(out)
}

// syncReplicas waits until every replica has fetched what its shard
// holds (writes are acknowledged by one replica of each shard).
func syncReplicas(t *testing.T, c *chcluster.Cluster, db string) {
	t.Helper()
	for i := range c.Nodes {
		for _, tb := range []string{"connections", "transactions", "pageviews"} {
			clusterQuery(t, c, i, fmt.Sprintf("SYSTEM SYNC REPLICA `%s`.%s_local", db, tb))
		}
	}
}

// checkLocal reads every server's local pageviews and transactions: each
// pageview id once in its shard, on the shard its client hashes to, the
// shards' counts adding up to want, and both replicas of a shard holding
// the same rows. It returns each shard's rows.
func checkLocal(t *testing.T, c *chcluster.Cluster, db string, want int) map[int]string {
	t.Helper()
	shards := map[int]string{}
	total := 0
	for i, n := range c.Nodes {
		where := fmt.Sprintf("s%dr%d", n.Shard, n.Replica)
		f := strings.Fields(clusterQuery(t, c, i, fmt.Sprintf(
			"SELECT count(), uniqExact(id), countIf(cityHash64(client) %% %d != %d) FROM `%s`.pageviews_local",
			2, n.Shard-1, db)))
		if len(f) != 3 {
			t.Fatalf("%s: pageview counts %v", where, f)
		}
		rows, _ := strconv.Atoi(f[0])
		if f[0] != f[1] {
			t.Errorf("%s holds %s pageview rows of %s ids", where, f[0], f[1])
		}
		if f[2] != "0" {
			t.Errorf("%s holds %s pageviews of the other shard's clients", where, f[2])
		}
		if rows == 0 || rows == want {
			t.Errorf("%s holds %d of %d pageviews, want a share", where, rows, want)
		}
		dump := clusterQuery(t, c, i, fmt.Sprintf("SELECT id, sensor, container_id, start_ns, end_ns, sensors FROM `%s`.pageviews_local ORDER BY id", db)) +
			"\n" + clusterQuery(t, c, i, fmt.Sprintf("SELECT id, sensor, pageview_id FROM `%s`.transactions_local ORDER BY id", db))
		if prev, ok := shards[n.Shard]; !ok {
			shards[n.Shard] = dump
			total += rows
		} else if prev != dump {
			t.Errorf("the replicas of shard %d hold different pageviews or transactions", n.Shard)
		}
	}
	if total != want {
		t.Errorf("the shards hold %d pageviews, want %d", total, want)
	}
	return shards
}

// checkTxPageviews reads every server's local transactions: each names
// the pageview the reference puts it in ("" for none).
func checkTxPageviews(t *testing.T, c *chcluster.Cluster, db string, ref reference) {
	t.Helper()
	want := map[string]string{}
	for pv, txs := range ref.members {
		for _, tx := range txs {
			want[tx] = pv
		}
	}
	for i, n := range c.Nodes {
		bad, rows := 0, 0
		for _, line := range strings.Split(clusterQuery(t, c, i, fmt.Sprintf("SELECT id, pageview_id FROM `%s`.transactions_local", db)), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 2 {
				t.Fatalf("s%dr%d: transaction row %q", n.Shard, n.Replica, line)
			}
			rows++
			if want[f[0]] != f[1] {
				bad++
			}
		}
		if bad > 0 || rows == 0 {
			t.Errorf("s%dr%d: %d of %d transactions name another pageview than the reference's", n.Shard, n.Replica, bad, rows)
		}
	}
}

// runHeldReplica runs the stitcher while a replica of shard 1 executes
// nothing of its pageviews' replication queue: the run must not end while
// that replica has a mutation of the stitcher's to apply (mutations are
// waited for on every server), and ends once the queue runs again. The
// replica held is not the table's leader, which assigns the mutations to
// both replicas: held, it would stall the other one too. The hold can
// only fail a run that does not wait for that replica, never one that does.
func runHeldReplica(t *testing.T, c *chcluster.Cluster, db string, st store.Store, cfg Config) Stats {
	t.Helper()
	held := -1
	for i := range 2 {
		if clusterQuery(t, c, i, fmt.Sprintf("SELECT is_leader FROM system.replicas WHERE database = '%s' AND table = 'pageviews_local'", db)) == "0" {
			held = i
		}
	}
	if held < 0 {
		t.Fatal("both replicas of shard 1 lead its pageviews")
	}
	table := fmt.Sprintf("`%s`.pageviews_local", db)
	clusterQuery(t, c, held, "SYSTEM STOP REPLICATION QUEUES "+table)
	holding := true
	release := func() {
		if _, err := c.Query(context.Background(), held, "SYSTEM START REPLICATION QUEUES "+table); err != nil {
			t.Errorf("start the replication queue again: %v", err)
		}
		holding = false
	}
	t.Cleanup(func() {
		if holding {
			release()
		}
	})
	acc, err := store.StitchingOf(st)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		stats Stats
		err   error
	}
	done := make(chan result, 1)
	go func() {
		stats, err := Run(context.Background(), acc, cfg)
		done <- result{stats, err}
	}()
	ended := func() {
		select {
		case r := <-done:
			t.Fatalf("the run ended (%+v, %v) while node %d applied none of its mutations", r.stats, r.err, held)
		default:
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	mutations := fmt.Sprintf("SELECT count() FROM system.mutations WHERE is_done = 0 AND database = '%s' AND table = 'pageviews_local'", db)
	for clusterQuery(t, c, held, mutations) == "0" {
		ended()
		if time.Now().After(deadline) {
			t.Fatal("the held replica listed no mutation of the stitcher's within 5 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The run stays at that mutation however long the replica is held (30 s
	// here, several times a whole run on this machine).
	for range 300 {
		ended()
		time.Sleep(100 * time.Millisecond)
	}
	ended()
	release()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.stats
	case <-time.After(10 * time.Minute):
		t.Fatal("the run did not end within 10 minutes of the replica's queue running again")
	}
	return Stats{}
}
