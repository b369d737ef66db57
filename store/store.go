// Package store keeps rtmon's records (connections, transactions, pageviews)
// and answers the dashboard's queries. Two engines implement one interface and
// pass one conformance suite (store/storetest) with identical answers:
//
//   - ClickHouse (clickhouse://host:9000/db) for production volumes; works on
//     Debian's clickhouse-server 18.16 as well as current releases.
//   - DuckDB, embedded (duckdb:path or memory:), the default needing no server.
//
// Writes are batched and flushed by size or age; a ClickHouse outage is
// absorbed by a bounded memory queue that spills to files and is replayed in
// order (see Options.SpillDir). Re-ingesting a capture never duplicates rows:
// every record has a stable string id and the writer drops ids that are
// already stored (see dedup in writer.go).
package store

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

// Store is implemented by both engines. It is a pageview.Sink, so the
// pipeline can stream into it; errors of streamed writes surface from Flush
// and Close.
type Store interface {
	pageview.Sink

	// WriteBatch queues records for writing; it returns before they are
	// stored. It blocks only when the memory queue is full and no spill
	// directory is configured.
	WriteBatch(ctx context.Context, b Batch) error
	// Flush returns when everything queued so far is stored, or with the
	// last storage error when ctx ends first (the records stay queued).
	Flush(ctx context.Context) error
	// Close flushes (bounded by Options.CloseTimeout) and releases the
	// engine. Anything not stored is left in spill files and the error says
	// exactly how many records and where; the next Open replays them.
	Close() error

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
	// PageviewByID returns one pageview with its transactions and connections.
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
	// Stats reports the writer's state, for progress output and tests.
	Stats() WriterStats
}

// Batch is a set of records written together.
type Batch struct {
	Connections  []*reconstruct.Connection
	Transactions []*reconstruct.Transaction
	Pageviews    []*pageview.Pageview
}

// Len is the number of records.
func (b *Batch) Len() int { return len(b.Connections) + len(b.Transactions) + len(b.Pageviews) }

// TimeRange is [From, To) in ns since the epoch. A zero From means no
// lower bound, a zero To no upper bound. A record belongs to the time of its transaction Start, pageview
// Start or connection FirstSeen.
type TimeRange struct {
	From, To int64
}

// Kind selects the record type a query reads.
type Kind string

const (
	Transactions Kind = "transactions"
	Pageviews    Kind = "pageviews"
)

// Components that can be queried per kind (duration columns).
var componentColumns = map[Kind]map[string]string{
	Transactions: {"total": "total", "tconn": "tconn", "trequest": "trequest", "tserver": "tserver",
		"ttransfer": "ttransfer", "rtt": "rtt_client"},
	Pageviews: {"total": "total", "tconn": "tconn", "tserver": "tserver", "ttransfer": "ttransfer",
		"tother": "tother"},
}

// Components lists the component names valid for kind.
func Components(k Kind) []string {
	if k == Pageviews {
		return []string{"total", "tconn", "tserver", "ttransfer", "tother"}
	}
	return []string{"total", "tconn", "trequest", "tserver", "ttransfer", "rtt"}
}

// HistogramQuery: bucket i counts values v with Edges[i] <= v < Edges[i+1];
// the last bucket is open above and values below Edges[0] count in bucket 0.
// Edges are computed in Go (LogEdges, LinearEdges) and compared as integers
// by both engines, so counts are exact and equal.
type HistogramQuery struct {
	Kind      Kind // default Transactions
	Range     TimeRange
	Class     string // "" = every class, one histogram each
	Component string // default "total"
	Edges     []int64
}

// ClassHistogram is one class's histogram.
type ClassHistogram struct {
	Class  string
	Edges  []int64
	Counts []int64
	Total  int64
}

// PercentileQuery selects exact percentiles. Contract (both engines): for n
// values sorted ascending (0-based), quantile q is the value at index
// min(floor(q*n), n-1), the q*n product taken in float64. That is ClickHouse's
// quantileExact; DuckDB computes the same index explicitly.
type PercentileQuery struct {
	Kind      Kind
	Range     TimeRange
	Class     string
	Component string
	Qs        []float64
	Bucket    time.Duration // PercentileSeries only
}

// ClassPercentiles has Values[i] for Qs[i].
type ClassPercentiles struct {
	Class  string
	Count  int64
	Values []int64
}

// SeriesPoint is one time bucket of one class; T is the bucket start
// (floor(start/Bucket)*Bucket, ns since the epoch).
type SeriesPoint struct {
	Class  string
	T      int64
	Count  int64
	Values []int64
}

// Counters sums over connections (by FirstSeen), transactions and pageviews
// in range.
type Counters struct {
	Connections           int64
	SYNLosses             int64
	SYNACKLosses          int64
	SYNLossGap            int64 // ns
	SYNACKLossGap         int64 // ns
	ConnRetransBytes      int64
	ConnsWithRetrans      int64
	IncompleteConnections int64
	ResetConnections      int64
	Transactions          int64
	TxRetransBytes        int64
	TxWithRetrans         int64
	IncompleteTx          int64
	NoResponseTx          int64
	ServerErrors          int64 // status >= 500
	Pageviews             int64
	IncompletePageviews   int64
}

// TopQuery ranks keys by mean total time (integer ns, sum/count rounded
// down), ties by key. A URL's key is the (host, url) pair, shown as host +
// url; ties order by host, then url.
type TopQuery struct {
	Kind     Kind
	Range    TimeRange
	Class    string
	By       string // "url" (host + url), "server", "client"
	Limit    int
	MinCount int64
}

// TopRow is one ranked key. For "url" Key is host+url; addresses are text.
type TopRow struct {
	Key   string
	Count int64
	Mean  int64
	Max   int64
}

// SearchQuery filters are all optional and always bound as parameters.
type SearchQuery struct {
	Kind        Kind
	Range       TimeRange
	Client      string // an address pattern as classes and rules write it (package addrpattern): 10.4.*.*, CIDR, != ...
	Class       string
	URLContains string // case-sensitive substring of the URL
	Status      int    // 0 = any
	MinTotal    int64  // ns
	Offset      int
	Limit       int // default 50, at most 10000
}

// SearchResult holds one page; Total counts all matches.
type SearchResult struct {
	Total        int64
	Transactions []*reconstruct.Transaction
	Pageviews    []*pageview.Pageview
}

// PageviewDetail is one pageview, exactly the transactions stored with its
// id as PageviewID (ordered by Start, then ID), and those transactions'
// connections (ordered by FirstSeen, then ID).
type PageviewDetail struct {
	Pageview     *pageview.Pageview
	Transactions []*reconstruct.Transaction
	Connections  []*reconstruct.Connection
}

// WriterStats describe the writer.
type WriterStats struct {
	Written       int64 // records stored
	Duplicates    int64 // records dropped because their id was already stored
	Queued        int64 // records waiting (memory and spill files)
	SpilledFiles  int   // spill files waiting
	Retries       int64 // failed insert attempts
	LastError     string
	ReplayedFiles int64 // spill files stored after a failure or from a previous run
	Rejected      int64 // records streamed through the Sink after Close (not stored)
	BatchRows     int   // records per stored batch (the effective Options.BatchRows)
	RollupErrors  int64 // failed rollup recomputes (readers recompute those minutes)
	Rollups       bool  // the writer keeps the rollups current (Options.Rollups)
}

// Options tune a store. Zero values take the defaults noted.
type Options struct {
	Sensor string // written into every row; default ""
	// BatchRows flushes when this many records are buffered (default
	// 600000 for ClickHouse, kept within 10k-600k; 800000 for DuckDB, which
	// writes whole row groups straight to the file).
	BatchRows int
	// MaxAge flushes a non-empty buffer this old (default 2 s).
	MaxAge time.Duration
	// MaxBufferRows bounds records held in memory while the engine fails
	// (default 1,000,000); beyond it batches go to SpillDir. While the
	// engine is healthy but behind, writers wait for room instead (bounded,
	// see README), so the bound can be exceeded by about one batch.
	MaxBufferRows int
	// SpillDir receives batches the engine could not take. Default for
	// ClickHouse: $TMPDIR/rtmon-spill/<host>_<port>_<db>; "-" disables
	// spilling (writers then block when the buffer is full). DuckDB does not
	// spill unless set.
	SpillDir string
	// MaxBackoff caps the retry backoff (default 10 s; first retry 100 ms).
	MaxBackoff time.Duration
	// CloseTimeout bounds the final flush in Close (default 30 s).
	CloseTimeout time.Duration
	// TTL drops data older than this (by day, wall clock); 0 keeps all.
	// ClickHouse 18.16 has no table TTL, so both engines drop whole days.
	TTL time.Duration
	// Classify gives the class of a transaction whose Class is empty (the
	// pageview stage always sets Class, so this serves callers writing bare
	// transactions). Without it such a transaction takes its connection's
	// class from the same batch, else the last class seen for its client
	// on a connection or pageview.
	Classify func(client netip.Addr) string
	// ConnectTimeout bounds reaching a server at Open (default 5 s).
	ConnectTimeout time.Duration
	// Rollups: "on" (also "" and "auto") makes the writer keep the
	// per-minute rollups that Summary reads current (Flush then waits for
	// them too); "off" leaves them to readers, which recompute stale
	// minutes when they ask, and keeps the web overview exact. On costs
	// ClickHouse ~12% of its ingest rate and DuckDB 3-8%, and takes the
	// overview over 10M transactions from 2.9 to 0.9 s (ClickHouse) and
	// from ~1 to 0.3 s (DuckDB).
	Rollups string
}

func (o *Options) defaults() {
	if o.BatchRows <= 0 {
		o.BatchRows = 50000
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 2 * time.Second
	}
	if o.MaxBufferRows <= 0 {
		o.MaxBufferRows = 1000000
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 10 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = 30 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 5 * time.Second
	}
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
	userBatch := opts.BatchRows > 0
	opts.defaults()
	switch opts.Rollups {
	case "", "auto", "on", "off":
	default:
		return nil, fmt.Errorf("rollups %q: want on, off or auto", opts.Rollups)
	}
	switch {
	case url == "memory:" || url == "memory":
		return openDuck(ctx, "", opts, userBatch)
	case strings.HasPrefix(url, "duckdb:"):
		path := strings.TrimPrefix(url, "duckdb:")
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return nil, fmt.Errorf("store url %q: duckdb needs a file path (duckdb:/path/to/file.db) or use memory:", url)
		}
		return openDuck(ctx, path, opts, userBatch)
	case strings.HasPrefix(url, "clickhouse://"):
		return openClickHouse(ctx, url, opts, userBatch)
	default:
		return nil, fmt.Errorf("store url %q: want memory:, duckdb:PATH or clickhouse://host:port/db", url)
	}
}
