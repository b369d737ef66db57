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

// Store is what Open returns: one engine, written and read.
type Store interface {
	Writer
	Querier
	Annotator
}

// Batch is a set of records written together.
type Batch struct {
	Connections  []*reconstruct.Connection
	Transactions []*reconstruct.Transaction
	Pageviews    []*pageview.Pageview
}

// Len is the number of records.
func (b *Batch) Len() int { return len(b.Connections) + len(b.Transactions) + len(b.Pageviews) }

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
