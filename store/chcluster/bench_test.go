package chcluster_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/chcluster"
	"github.com/rtmon/rtmon/store/chtest"
	"github.com/rtmon/rtmon/store/storetest"
)

// BenchmarkClusterWritePaths compares the two ways a sensor can write to
// the cluster (docs/cluster.md): RTMON_BENCH_TX transactions (default
// 300,000) are ingested by a store through the Distributed tables, then
// the same transactions rows, as clickhouse-client's native INSERT
// sends them, go (a) through the Distributed table with
// insert_distributed_sync, one INSERT, and (b) straight to each shard's
// local table, split by the sharding key, one INSERT per shard at once.
func BenchmarkClusterWritePaths(b *testing.B) {
	c := needCluster(b)
	ctx := context.Background()
	n := 300_000
	if v, err := strconv.Atoi(os.Getenv("RTMON_BENCH_TX")); err == nil && v > 0 {
		n = v
	}
	client, err := clickhouseClient(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for range b.N {
		src := freshDB()
		s, err := store.Open(ctx, c.URL(0, src), store.Options{Rollups: "off", SpillDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		res, err := storetest.Ingest(ctx, s, n, 0)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		fmt.Printf("store through Distributed: %d tx (%d records) in %v: %.0f tx/s, %.0f records/s\n",
			res.Transactions, res.Records, res.Elapsed, res.TxPerSec(), res.RecordsPerSec())
		b.ReportMetric(res.TxPerSec(), "store-tx/s")

		dir := b.TempDir()
		files := make([]string, 2)
		for k := range files {
			files[k] = filepath.Join(dir, fmt.Sprintf("shard%d.native", k+1))
			run(b, client, files[k], "", "--port", strconv.Itoa(c.Nodes[0].TCPPort), "--query",
				fmt.Sprintf("SELECT * FROM `%s`.transactions WHERE cityHash64(client) %% 2 = %d FORMAT Native", src, k))
		}
		dist, local := emptyDB(b, c), emptyDB(b, c)
		t0 := time.Now()
		for _, f := range files {
			run(b, client, "", f, "--port", strconv.Itoa(c.Nodes[0].TCPPort), "--insert_distributed_sync=1", "--query",
				fmt.Sprintf("INSERT INTO `%s`.transactions FORMAT Native", dist))
		}
		distTime := time.Since(t0)
		t0 = time.Now()
		var wg sync.WaitGroup
		for k, f := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(b, client, "", f, "--port", strconv.Itoa(c.Nodes[2*k].TCPPort), "--query",
					fmt.Sprintf("INSERT INTO `%s`.transactions_local FORMAT Native", local))
			}()
		}
		wg.Wait()
		localTime := time.Since(t0)
		rows := countRows(b, c, dist)
		if got := countRows(b, c, local); got != rows || rows != res.Transactions {
			b.Fatalf("stored %d rows through Distributed, %d locally, want %d", rows, got, res.Transactions)
		}
		fmt.Printf("clickhouse-client INSERT of %d transactions: through Distributed %v (%.0f rows/s), to the local shards %v (%.0f rows/s)\n",
			rows, distTime, float64(rows)/distTime.Seconds(), localTime, float64(rows)/localTime.Seconds())
		b.ReportMetric(float64(rows)/distTime.Seconds(), "dist-rows/s")
		b.ReportMetric(float64(rows)/localTime.Seconds(), "local-rows/s")
	}
}

// clickhouseClient finds clickhouse-client, installing it when missing.
func clickhouseClient(ctx context.Context) (string, error) {
	if p, err := exec.LookPath("clickhouse-client"); err == nil {
		return p, nil
	}
	if err := chtest.AptInstall(ctx, "clickhouse-client"); err != nil {
		return "", err
	}
	return exec.LookPath("clickhouse-client")
}

// run runs clickhouse-client with stdout to out and stdin from in (""
// for none).
func run(b *testing.B, bin, out, in string, args ...string) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	var errText strings.Builder
	cmd.Stderr = &errText
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cmd.Stdout = f
	}
	if in != "" {
		f, err := os.Open(in)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	if err := cmd.Run(); err != nil {
		b.Fatalf("clickhouse-client %v: %v: %s", args, err, errText.String())
	}
}

// emptyDB is a new cluster-mode database with the store's schema.
func emptyDB(b *testing.B, c *chcluster.Cluster) string {
	db := freshDB()
	s, err := store.Open(context.Background(), c.URL(0, db), store.Options{SpillDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	return db
}

func countRows(b *testing.B, c *chcluster.Cluster, db string) int64 {
	n, err := strconv.ParseInt(query(b, c, 0, fmt.Sprintf("SELECT count() FROM `%s`.transactions", db)), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return n
}
