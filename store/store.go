package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// Writer takes records in: streamed through the pageview.Sink methods or in
// batches. Behind it are the batching, the spill files and the rollup
// upkeep; errors of streamed writes surface from Flush and Close.
type Writer interface {
	pageview.Sink

	// WriteBatch queues records for writing; it returns before they are
	// stored. It blocks only when the memory queue is full and no spill
	// directory is configured. After Close it returns ErrClosed.
	WriteBatch(ctx context.Context, b Batch) error
	// Flush returns when everything queued so far is stored, or with the
	// last storage error when ctx ends first (the records stay queued).
	Flush(ctx context.Context) error
	// Stats reports the writer's state, for progress output and tests.
	Stats() WriterStats
	// Close flushes (bounded by Options.CloseTimeout) and releases the
	// engine. Anything not stored is left in spill files and the error says
	// exactly how many records and where; the next Open replays them.
	Close() error
}

// Querier answers the dashboard's and the what-if's reads. Every filter is
// bound as a parameter, never spliced into SQL.
type Querier interface {
	// Histogram counts values of one component per class into fixed buckets.
	Histogram(ctx context.Context, q HistogramQuery) ([]ClassHistogram, error)
	// Percentiles gives exact percentiles per class (see Percentile contract).
	Percentiles(ctx context.Context, q PercentileQuery) ([]ClassPercentiles, error)
	// PercentileSeries gives the same per time bucket of q.Bucket.
	PercentileSeries(ctx context.Context, q PercentileQuery) ([]SeriesPoint, error)
	// Counters sums losses, retransmissions and incomplete records.
	Counters(ctx context.Context, r TimeRange, class string) (Counters, error)
	// TopSlow ranks URLs, servers or clients by mean total time.
	TopSlow(ctx context.Context, q TopQuery) ([]TopRow, error)
	// Search finds transactions or pageviews by filters, newest first.
	Search(ctx context.Context, q SearchQuery) (SearchResult, error)
	// PageviewByID returns one pageview with its transactions and
	// connections; ErrNotFound when no pageview has that id.
	PageviewByID(ctx context.Context, id string) (*PageviewDetail, error)
	// Classes lists the classes that have records in r, sorted.
	Classes(ctx context.Context, r TimeRange) ([]string, error)
	// Extent is the size and time span of one kind's records.
	Extent(ctx context.Context, k Kind) (Extent, error)
	// ComponentSums is, per class, the count and exact sum of every
	// component in range.
	ComponentSums(ctx context.Context, q SumQuery) ([]ComponentSums, error)
	// Summary answers the overview of a range from per-minute rollups:
	// exact counts, sums, counters and histograms, percentiles within
	// RollupRelError, at a cost that does not grow with the records.
	Summary(ctx context.Context, q SummaryQuery) (*Summary, error)
	// Stats reports the writer of this store as readers need it: Written
	// changes when the data does (a cache key), Rollups says whether
	// Summary's rollups are kept current, LastError and Queued how
	// writing goes (health, metrics).
	Stats() WriterStats
}

// Store is what Open returns: one engine, written and read.
type Store interface {
	Writer
	Querier
}

// Batch is a set of records written together.
type Batch struct {
	Connections  []*reconstruct.Connection
	Transactions []*reconstruct.Transaction
	Pageviews    []*pageview.Pageview
}

// Len is the number of records.
func (b *Batch) Len() int { return len(b.Connections) + len(b.Transactions) + len(b.Pageviews) }

// WriterStats describe the writer.
type WriterStats struct {
	Written       int64 // records stored
	Duplicates    int64 // records dropped because their id was already stored
	Queued        int64 // records waiting (streamed, memory and spill files)
	SpilledFiles  int   // spill files waiting
	Retries       int64 // failed insert attempts
	LastError     string
	ReplayedFiles int64 // spill files stored after a failure or from a previous run
	Rejected      int64 // records streamed through the Sink after Close (not stored)
	BatchRows     int   // records per stored batch (the effective Options.BatchRows)
	RollupErrors  int64 // failed rollup recomputes (readers recompute those minutes)
	Rollups       bool  // the writer keeps the rollups current (Options.Rollups)
}

// Open opens a store by URL:
//
//	memory:                      DuckDB in memory
//	duckdb:PATH                  DuckDB file (created if missing)
//	clickhouse://host:9000/db    ClickHouse native protocol; user, password
//	                             and clickhouse-go DSN options as usual
//
// The schema is created or migrated before Open returns; a malformed URL or
// unreachable server is an error here, not at the first write.
func Open(ctx context.Context, url string, opts Options) (Store, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts.defaults()
	var b backend
	var err error
	switch {
	case url == "memory:" || url == "memory":
		b, err = connectDuck(ctx, "")
	case strings.HasPrefix(url, "duckdb:"):
		path := strings.TrimPrefix(strings.TrimPrefix(url, "duckdb:"), "//")
		if path == "" {
			return nil, fmt.Errorf("store url %q: duckdb needs a file path (duckdb:/path/to/file.db) or use memory:", url)
		}
		b, err = connectDuck(ctx, path)
	case strings.HasPrefix(url, "clickhouse://"):
		b, err = connectClickHouse(ctx, url, opts.ConnectTimeout)
	default:
		return nil, fmt.Errorf("store url %q: want memory:, duckdb:PATH or clickhouse://host:port/db", url)
	}
	if err != nil {
		return nil, err
	}
	return open(ctx, b, opts)
}
