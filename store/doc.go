// Package store keeps rtmon's records (connections, transactions,
// pageviews) in an SQL engine and answers the dashboard's and the what-if's
// questions about them.
//
// # Opening
//
// Open takes a URL: "memory:" (DuckDB in memory), "duckdb:PATH" (a DuckDB
// file) or "clickhouse://host:9000/db" ("...?cluster=NAME": a ClickHouse
// cluster, docs/cluster.md). Both engines share one open path:
// the schema is created or migrated, and the writer, the queries and the
// retention are set up the same way; the engines differ only in how they
// spell a few SQL forms (the dialect) and how they insert a batch of
// columns. Options tune the store; nothing is read from the environment.
//
// # Two interfaces
//
// A Store is a Writer and a Querier. Code that only reads, like the web
// UI, takes a Querier; the pipeline hands records to a Writer:
//
//   - The Writer is a pageview.Sink (records streamed one by one) and
//     takes whole Batches with WriteBatch. Records are queued, batched,
//     deduplicated by id and inserted in the background; while the engine
//     fails they are held in memory and then spilled to files that the
//     next Open replays. Flush waits until everything queued is stored;
//     Close flushes and releases the engine.
//   - The Querier answers histograms, exact percentiles and their series,
//     counters, the slowest URLs, servers or clients, searches and one
//     pageview with its transactions and connections. Summary answers the
//     overview of a range from per-minute rollups the writer keeps
//     current: exact counts, sums and histograms, percentiles within
//     RollupRelError, at a cost that does not grow with the records.
//
// The Querier, its requests and results, the histogram edges and the
// typed errors live in the leaf package store/query, which imports no
// engine: readers (web, whatif) import that alone, so they do not link
// the DuckDB and ClickHouse drivers. Package store re-exports each of
// those names as an alias (store.Querier is query.Querier, store.ErrNotFound
// is query.ErrNotFound), so code that opens a store needs only this package.
//
// Every filter is bound as a parameter, never spliced into SQL. A search's
// client filter is an address pattern as classes and what-if rules write
// it (package addrpattern).
//
// # Errors
//
// Errors a caller acts on are matched with errors.Is: ErrNotFound (no
// pageview with that id) and ErrClosed (a write after Close). Any other
// error is a storage or validation failure with its context in the text.
//
// # Conformance
//
// Package storetest holds the suite every engine passes: the same records
// written to the engine and to a plain-Go reference, and every query's
// answer compared exactly.
package store
