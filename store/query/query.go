package query

import "context"

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
	// SensorCounters is Counters of one sensor's records ("": every
	// sensor's).
	SensorCounters(ctx context.Context, r TimeRange, class, sensor string) (Counters, error)
	// TopSlow ranks URLs, servers or clients by mean total time.
	TopSlow(ctx context.Context, q TopQuery) ([]TopRow, error)
	// Search finds transactions or pageviews by filters, newest first.
	Search(ctx context.Context, q SearchQuery) (SearchResult, error)
	// SearchConnections pages the connection records of a range, newest
	// first, as Search pages transactions: the bulk read of connections.
	SearchConnections(ctx context.Context, q ConnectionSearch) (ConnectionResult, error)
	// PageviewByID returns one pageview with its transactions and
	// connections; ErrNotFound when no pageview has that id.
	PageviewByID(ctx context.Context, id string) (*PageviewDetail, error)
	// Sensors lists the sensors that stored records in r with their
	// counts, the most transactions first (at most MaxSensors).
	Sensors(ctx context.Context, r TimeRange) ([]SensorCounts, error)
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
	// Sample is a bounded, reproducible sample of component values per
	// class (the compare mode's input; see SampleQuery).
	Sample(ctx context.Context, q SampleQuery) ([]ClassSample, error)
	// Stats reports the writer of this store as readers need it: Written
	// changes when the data does (a cache key), Rollups says whether
	// Summary's rollups are kept current, LastError and Queued how
	// writing goes (health, metrics).
	Stats() WriterStats
}

// WriterStats describe the writer behind a store: Querier.Stats reports
// them to readers, the store's Writer to the pipeline. The fields named
// after Options are package store's options.
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
	// SpillBytes is the size of the spill files waiting. CorruptSpillFiles
	// counts spill files that could not be read back (set aside as
	// *.corrupt, their LostRecords counted) rather than retried forever.
	SpillBytes        int64
	CorruptSpillFiles int64
	// LostRecords also counts the records Close could neither store nor
	// spill (the error it returns names them).
	LostRecords int64
	// Failing: the oldest queued batch failed to store and is being
	// retried (Retries counts the attempts); false once a batch is stored.
	Failing bool
	// DiskFull: storing or spilling fails now for lack of disk space.
	DiskFull bool
	// SpillFailing: the last spill failed, so a full memory buffer holds
	// writers back (backpressure) until a batch is stored again;
	// SpillFailures counts failed spills.
	SpillFailing  bool
	SpillFailures int64
	// Reopens counts reopenings of an embedded database that had
	// invalidated itself after a failed write (DuckDB on a full disk).
	Reopens int64
	// ShardsDown lists the shards of a ClickHouse cluster whose replicas
	// all failed the last probe (a few seconds old at most): their records
	// wait in the writer, and reads under WithPartial answer without them.
	ShardsDown []int
	// HeldShards lists the shards (1-based) that failed to take their
	// records while others took theirs; HeldRecords of theirs wait, in
	// memory and spill files (counted in Queued), retried until stored.
	HeldShards  []int
	HeldRecords int64
}
