package chcluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chcluster"
	"github.com/rtmon/rtmon/store/storetest"
)

// envInt is a positive integer from the environment, else def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// shardRun is one cluster's ingest measurements, in records (rows of
// connections, transactions and pageviews) per second.
type shardRun struct {
	shards      int
	rows        int64
	store       float64 // the store through the Distributed tables
	client      float64 // clickhouse-client's native INSERT of the same rows
	storeTime   time.Duration
	clientTime  time.Duration
	transaction int64
}

// BenchmarkClusterShards measures the ingest rate of a 1 x 2 and a 2 x 2
// cluster (issue #16): RTMON_BENCH_TX transactions (default 1,000,000,
// with their connections and pageviews) ingested by a store (each shard's
// rows to its local tables; rollups off: the insert path alone), then the
// same rows copied out in Native format and sent by clickhouse-client's
// own INSERT through the Distributed tables of an empty database of the
// same cluster, the server's own native path. The 1-shard cluster is
// stopped before the 2-shard one runs, so they do not share the CPU.
func BenchmarkClusterShards(b *testing.B) {
	ctx := context.Background()
	n := envInt("RTMON_BENCH_TX", 1_000_000)
	client, err := clickhouseClient(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		one, err := chcluster.Start(ctx, b.TempDir(), chcluster.Options{Shards: 1, Replicas: 2})
		if err != nil {
			b.Fatalf("1-shard cluster: %v", err)
		}
		b.Cleanup(one.Stop)
		r1 := shardIngest(b, one, client, n)
		one.Stop()
		r2 := shardIngest(b, needCluster(b), client, n)
		for _, r := range []shardRun{r1, r2} {
			fmt.Printf("%d shard(s) x 2 replicas, %d tx, %d rows: store %.0f rows/s (%v), clickhouse-client %.0f rows/s (%v), store/client %.2f\n",
				r.shards, r.transaction, r.rows, r.store, r.storeTime.Round(time.Millisecond), r.client,
				r.clientTime.Round(time.Millisecond), r.store/r.client)
			b.ReportMetric(r.store, fmt.Sprintf("store-%dshard-rows/s", r.shards))
			b.ReportMetric(r.client, fmt.Sprintf("client-%dshard-rows/s", r.shards))
			b.ReportMetric(r.store/r.client, fmt.Sprintf("store/client-%dshard", r.shards))
		}
		fmt.Printf("2 shards / 1 shard: store %.2f, clickhouse-client %.2f\n", r2.store/r1.store, r2.client/r1.client)
		b.ReportMetric(r2.store/r1.store, "store-2/1")
		b.ReportMetric(r2.client/r1.client, "client-2/1")
	}
}

// shardIngest ingests n transactions through a store into a fresh
// database of c, then copies its rows with clickhouse-client into
// another one, both through server 0, and checks both hold every row.
func shardIngest(b *testing.B, c *chcluster.Cluster, client string, n int) shardRun {
	ctx := context.Background()
	shards := c.Nodes[len(c.Nodes)-1].Shard
	src := freshDB()
	s, err := store.Open(ctx, c.URL(0, src), store.Options{Rollups: "off", SpillDir: b.TempDir()})
	if err != nil {
		b.Fatalf("%d shard(s): open: %v", shards, err)
	}
	res, err := storetest.Ingest(ctx, s, n, 0)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		b.Fatalf("%d shard(s): store ingest: %v", shards, err)
	}
	if got := tableRows(b, c, src); got != res.Records {
		b.Fatalf("%d shard(s): store wrote %d records, the tables hold %d", shards, res.Records, got)
	}
	port := strconv.Itoa(c.Nodes[0].TCPPort)
	dir := b.TempDir()
	for _, t := range recordTables {
		run(b, client, filepath.Join(dir, t+".native"), "", "--port", port, "--query",
			fmt.Sprintf("SELECT * FROM `%s`.%s FORMAT Native", src, t))
	}
	dst := emptyDB(b, c)
	t0 := time.Now()
	// One INSERT per table, one after another, as the store's single
	// writer sends them.
	for _, t := range recordTables {
		run(b, client, "", filepath.Join(dir, t+".native"), "--port", port, "--insert_distributed_sync=1", "--query",
			fmt.Sprintf("INSERT INTO `%s`.%s FORMAT Native", dst, t))
	}
	clientTime := time.Since(t0)
	if got := tableRows(b, c, dst); got != res.Records {
		b.Fatalf("%d shard(s): clickhouse-client copied %d rows of %d", shards, got, res.Records)
	}
	return shardRun{shards: shards, rows: res.Records, transaction: res.Transactions,
		store: res.RecordsPerSec(), storeTime: res.Elapsed,
		client: float64(res.Records) / clientTime.Seconds(), clientTime: clientTime}
}

// tableRows counts the rows of every record table of db.
func tableRows(b *testing.B, c *chcluster.Cluster, db string) int64 {
	var sum int64
	for _, t := range recordTables {
		v := query(b, c, 0, fmt.Sprintf("SELECT count() FROM `%s`.%s", db, t))
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatalf("count of %s.%s: %q: %v", db, t, v, err)
		}
		sum += n
	}
	return sum
}
