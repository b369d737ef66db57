// Package query is what a store answers: the Querier interface, its
// requests (TimeRange, Kind, SearchQuery, SummaryQuery, ...) and results
// (SearchResult, PageviewDetail, Summary, ...), the histogram edges and
// rollup precision those are defined on, and the typed errors ErrNotFound
// and ErrClosed.
//
// It imports no database driver and no engine: readers such as the web UI
// and the what-if loader depend on this package alone and are handed a
// Querier, the one store.Open returns or a fake. Package store implements
// it on DuckDB and ClickHouse and re-exports every name here (store.Querier
// is query.Querier), so code that opens a store need not import both.
//
// Errors are matched with errors.Is; store.ErrNotFound and ErrNotFound are
// the same value.
package query
