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
// pageviews) into s. Records are generated in chunks of about chunkTx
// before timing starts, so Elapsed measures the store alone (WriteBatch
// until Flush returns), not the generator. Each timed chunk holds a whole
// number of the store's batches (Stats().BatchRows) and the excess is
// carried into the next chunk: the Flush that ends a chunk then stores
// full batches, as a continuous stream would, instead of a small tail
// that costs an engine more per record (DuckDB: a WAL write and
// checkpoint for less than a row group). Only the last chunk's tail is
// short. The data spans about one day from T0.
func Ingest(ctx context.Context, s store.Store, nTx, chunkTx int) (res IngestResult, err error) {
	cpu0 := processCPU()
	defer func() { res.ClientCPU = processCPU() - cpu0 }()
	if chunkTx <= 0 {
		chunkTx = 1_000_000
	}
	batchRows := max(s.Stats().BatchRows, 1)
	// ~2.5 transactions per connection: spread nTx over 24 h.
	g := NewGen(1, T0, int64(24*time.Hour)/int64(nTx)*5/2)
	var carry []store.Batch
	generated := 0
	for res.Transactions < int64(nTx) {
		t0 := time.Now()
		batches := carry
		carry = nil
		records := 0
		for _, b := range batches {
			records += b.Len()
		}
		// About 1.8 records per transaction.
		want := max(1, chunkTx*9/5/batchRows) * batchRows
		for records < want && generated < nTx {
			b := g.Next(min(10000, nTx-generated))
			generated += len(b.Transactions)
			records += b.Len()
			batches = append(batches, b)
		}
		if generated < nTx || records > want {
			batches, carry = splitRecords(batches, want)
		}
		res.GenElapsed += time.Since(t0)
		t1 := time.Now()
		n := 0
		for _, b := range batches {
			if err = s.WriteBatch(ctx, b); err != nil {
				return res, fmt.Errorf("ingest: %w", err)
			}
			res.Records += int64(b.Len())
			n += len(b.Transactions)
		}
		if err = s.Flush(ctx); err != nil {
			return res, fmt.Errorf("ingest flush: %w", err)
		}
		res.Elapsed += time.Since(t1)
		res.Transactions += int64(n)
		if generated >= nTx && len(carry) == 0 && n == 0 {
			break
		}
	}
	return res, nil
}

// splitRecords cuts bs after exactly n records (connections, then
// transactions, then pageviews of each batch, in order).
func splitRecords(bs []store.Batch, n int) (head, tail []store.Batch) {
	for i, b := range bs {
		if n >= b.Len() {
			head = append(head, b)
			n -= b.Len()
			continue
		}
		var h, t store.Batch
		take := func(k int) int { return min(n, k) }
		c := take(len(b.Connections))
		h.Connections, t.Connections = b.Connections[:c], b.Connections[c:]
		n -= c
		x := take(len(b.Transactions))
		h.Transactions, t.Transactions = b.Transactions[:x], b.Transactions[x:]
		n -= x
		p := take(len(b.Pageviews))
		h.Pageviews, t.Pageviews = b.Pageviews[:p], b.Pageviews[p:]
		if h.Len() > 0 {
			head = append(head, h)
		}
		tail = append(append(tail, t), bs[i+1:]...)
		return head, tail
	}
	return head, nil
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
