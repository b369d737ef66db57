package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/rtmon/rtmon/store"
	"github.com/rtmon/rtmon/store/storetest"
)

// benchTx is the data size of the store benchmarks: RTMON_BENCH_TX
// transactions (default 1,000,000; the design target is 10,000,000).
func benchTx() int {
	if n, err := strconv.Atoi(os.Getenv("RTMON_BENCH_TX")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// benchStore loads benchTx transactions, reports the ingest rate, then the
// p50/p95 of every dashboard query as custom metrics. RTMON_BENCH_ROLLUPS
// sets Options.Rollups (on, off; default the engine's).
func benchStore(b *testing.B, url string, serverCPU func() (time.Duration, error)) {
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		s, err := store.Open(ctx, url, store.Options{Rollups: os.Getenv("RTMON_BENCH_ROLLUPS")})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		var srv0 time.Duration
		if serverCPU != nil {
			srv0, _ = serverCPU()
		}
		res, err := storetest.Ingest(ctx, s, benchTx(), 0)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("%s: client CPU during ingest %v (generation included)", b.Name(), res.ClientCPU)
		if serverCPU != nil {
			srv1, err := serverCPU()
			if err == nil {
				fmt.Printf(", server CPU %v", srv1-srv0)
			}
		}
		fmt.Println()
		b.ReportMetric(res.TxPerSec(), "tx/s")
		b.ReportMetric(res.RecordsPerSec(), "records/s")
		fmt.Printf(b.Name()+": ingested %d tx (%d records) in %v (generation %v excluded): %.0f tx/s, %.0f records/s\n",
			res.Transactions, res.Records, res.Elapsed, res.GenElapsed, res.TxPerSec(), res.RecordsPerSec())
		if os.Getenv("RTMON_BENCH_INGEST_ONLY") != "" {
			// For profiling the write path alone.
			b.StopTimer()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			continue
		}
		lat, err := storetest.DashboardQueries(ctx, s, 20)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range lat {
			fmt.Printf("%-12s %-45s p50 %8.1f ms  p95 %8.1f ms  max %8.1f ms\n", b.Name(), l.Name,
				float64(l.P50.Microseconds())/1000, float64(l.P95.Microseconds())/1000, float64(l.Max.Microseconds())/1000)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDuckDB(b *testing.B) {
	benchStore(b, "duckdb:"+filepath.Join(b.TempDir(), "bench.duckdb"), nil)
}

func BenchmarkClickHouse(b *testing.B) {
	srv := needCH(b)
	benchStore(b, srv.URL(freshDB()), srv.CPUTime)
}
