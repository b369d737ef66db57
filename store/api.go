package store

import "github.com/rtmon/rtmon/store/query"

// The read API lives in package query so that readers (web, whatif) do not
// link the engines; these names keep store's engines and the code that
// opens a store spelling it store.X. Aliases, not copies: a store.Querier
// is a query.Querier, and the errors are the same values for errors.Is.

type (
	Querier           = query.Querier
	WriterStats       = query.WriterStats
	TimeRange         = query.TimeRange
	Kind              = query.Kind
	HistogramQuery    = query.HistogramQuery
	ClassHistogram    = query.ClassHistogram
	PercentileQuery   = query.PercentileQuery
	ClassPercentiles  = query.ClassPercentiles
	SeriesPoint       = query.SeriesPoint
	Counters          = query.Counters
	ClassCounters     = query.ClassCounters
	TopQuery          = query.TopQuery
	TopRow            = query.TopRow
	SearchQuery       = query.SearchQuery
	SearchResult      = query.SearchResult
	ConnectionSearch  = query.ConnectionSearch
	ConnectionResult  = query.ConnectionResult
	PageviewDetail    = query.PageviewDetail
	Extent            = query.Extent
	SumQuery          = query.SumQuery
	ComponentSums     = query.ComponentSums
	SummaryQuery      = query.SummaryQuery
	Summary           = query.Summary
	SensorPercentiles = query.SensorPercentiles
)

const (
	Transactions = query.Transactions
	Pageviews    = query.Pageviews
)

var (
	ErrNotFound = query.ErrNotFound
	ErrClosed   = query.ErrClosed

	RollupEdges    = query.RollupEdges
	RollupRelError = query.RollupRelError
)

// Components lists the component names valid for kind (query.Components).
func Components(k Kind) []string { return query.Components(k) }

// LogEdges returns log-spaced bucket edges (query.LogEdges).
func LogEdges(lo, hi int64, n int) []int64 { return query.LogEdges(lo, hi, n) }

// LinearEdges returns evenly spaced bucket edges (query.LinearEdges).
func LinearEdges(step int64, n int) []int64 { return query.LinearEdges(step, n) }

// RollupBucket is the RollupEdges bucket of v (query.RollupBucket).
func RollupBucket(v int64) int { return query.RollupBucket(v) }

// RollupEstimate is a rollup percentile's value for bucket b
// (query.RollupEstimate).
func RollupEstimate(b int, lo, hi int64) int64 { return query.RollupEstimate(b, lo, hi) }
