package storetest

import (
	"context"
	"fmt"
	"sort"
	"syscall"
	"time"

	"github.com/rtmon/rtmon/store"
)

// IngestResult is the outcome of Ingest.
type IngestResult struct {
	Transactions int64
	Records      int64 // transactions + connections + pageviews
	Elapsed      time.Duration
	GenElapsed   time.Duration // generating records, excluded from Elapsed
	ClientCPU    time.Duration // this process's user+system CPU over the whole run
}

// TxPerSec is the ingest rate in transactions per second.
func (r IngestResult) TxPerSec() float64 { return float64(r.Transactions) / r.Elapsed.Seconds() }

// RecordsPerSec is the ingest rate in records per second.
func (r IngestResult) RecordsPerSec() float64 { return float64(r.Records) / r.Elapsed.Seconds() }

// Ingest writes nTx synthetic transactions (with their connections and
// pageviews) into s. Records are generated in chunks of chunkTx before
// timing starts, so Elapsed measures the store alone (WriteBatch until
// Flush returns), not the generator. The data spans about one day from T0.
func Ingest(ctx context.Context, s store.Store, nTx, chunkTx int) (res IngestResult, err error) {
	cpu0 := processCPU()
	defer func() { res.ClientCPU = processCPU() - cpu0 }()
	if chunkTx <= 0 {
		chunkTx = 1_000_000
	}
	// ~2.5 transactions per connection: spread nTx over 24 h.
	g := NewGen(1, T0, int64(24*time.Hour)/int64(nTx)*5/2)
	for res.Transactions < int64(nTx) {
		t0 := time.Now()
		var batches []store.Batch
		n := 0
		for n < min(chunkTx, nTx-int(res.Transactions)) {
			b := g.Next(10000)
			n += len(b.Transactions)
			batches = append(batches, b)
		}
		res.GenElapsed += time.Since(t0)
		t1 := time.Now()
		for _, b := range batches {
			if err = s.WriteBatch(ctx, b); err != nil {
				return res, fmt.Errorf("ingest: %w", err)
			}
			res.Records += int64(b.Len())
		}
		if err = s.Flush(ctx); err != nil {
			return res, fmt.Errorf("ingest flush: %w", err)
		}
		res.Elapsed += time.Since(t1)
		res.Transactions += int64(n)
	}
	return res, nil
}

// QueryLatency is one dashboard query's measured latencies.
type QueryLatency struct {
	Name     string
	P50, P95 time.Duration
	Max      time.Duration
}

// DashboardQueries runs each dashboard query reps times over the whole
// data set (T0 .. T0+25h) and reports latencies.
func DashboardQueries(ctx context.Context, s store.Store, reps int) ([]QueryLatency, error) {
	r := store.TimeRange{From: T0, To: T0 + int64(25*time.Hour)}
	hour := store.TimeRange{From: T0 + int64(10*time.Hour), To: T0 + int64(11*time.Hour)}
	qs := []float64{0.5, 0.9, 0.95, 0.99}
	edges := store.LogEdges(1e5, 1e10, 40)
	var pvID string
	res, err := s.Search(ctx, store.SearchQuery{Kind: store.Pageviews, Range: hour, Limit: 1})
	if err != nil || len(res.Pageviews) == 0 {
		return nil, fmt.Errorf("bench: no pageview to look up (err %v)", err)
	}
	pvID = res.Pageviews[0].ID
	queries := []struct {
		name string
		fn   func() error
	}{
		{"histogram total, all classes, 1 day", func() error {
			_, err := s.Histogram(ctx, store.HistogramQuery{Range: r, Edges: edges})
			return err
		}},
		{"histogram tserver, class gold, 1 day", func() error {
			_, err := s.Histogram(ctx, store.HistogramQuery{Range: r, Class: "gold", Component: "tserver", Edges: edges})
			return err
		}},
		{"percentiles total, all classes, 1 day", func() error {
			_, err := s.Percentiles(ctx, store.PercentileQuery{Range: r, Qs: qs})
			return err
		}},
		{"percentiles total, 1 hour", func() error {
			_, err := s.Percentiles(ctx, store.PercentileQuery{Range: hour, Qs: qs})
			return err
		}},
		{"percentile series 5 min, all classes, 1 day", func() error {
			_, err := s.PercentileSeries(ctx, store.PercentileQuery{Range: r, Qs: qs, Bucket: 5 * time.Minute})
			return err
		}},
		{"pageview percentiles, 1 day", func() error {
			_, err := s.Percentiles(ctx, store.PercentileQuery{Kind: store.Pageviews, Range: r, Qs: qs})
			return err
		}},
		{"counters, 1 day", func() error {
			_, err := s.Counters(ctx, r, "")
			return err
		}},
		{"top slow urls, 1 day", func() error {
			_, err := s.TopSlow(ctx, store.TopQuery{Range: r, By: "url", Limit: 20})
			return err
		}},
		{"top slow servers, 1 day", func() error {
			_, err := s.TopSlow(ctx, store.TopQuery{Range: r, By: "server", Limit: 20})
			return err
		}},
		{"top slow clients, 1 day", func() error {
			_, err := s.TopSlow(ctx, store.TopQuery{Range: r, By: "client", Limit: 20})
			return err
		}},
		{"search class+min total, page 2", func() error {
			_, err := s.Search(ctx, store.SearchQuery{Range: r, Class: "silver", MinTotal: 500e6, Offset: 50, Limit: 50})
			return err
		}},
		{"search client prefix+url, 1 day", func() error {
			_, err := s.Search(ctx, store.SearchQuery{Range: r, Client: "10.1.0.0/16", URLContains: "page-4", Limit: 50})
			return err
		}},
		{"pageview by id", func() error {
			_, err := s.PageviewByID(ctx, pvID)
			return err
		}},
		{"classes, 1 day", func() error {
			_, err := s.Classes(ctx, r)
			return err
		}},
	}
	var out []QueryLatency
	for _, q := range queries {
		var ds []time.Duration
		for i := 0; i < reps; i++ {
			t := time.Now()
			if err := q.fn(); err != nil {
				return out, fmt.Errorf("bench %s: %w", q.name, err)
			}
			ds = append(ds, time.Since(t))
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		p95 := ds[min(len(ds)-1, int(0.95*float64(len(ds))))]
		out = append(out, QueryLatency{Name: q.name, P50: ds[len(ds)/2], P95: p95, Max: ds[len(ds)-1]})
	}
	return out, nil
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
