package query

import (
	"time"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
)

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

// Components lists the component names valid for kind: the total, the
// parts it is made of (export's list, in order) and, for transactions, the
// client's round-trip time.
func Components(k Kind) []string {
	if k == Pageviews {
		return append([]string{"total"}, export.PageviewParts()...)
	}
	return append(append([]string{"total"}, export.TransactionParts()...), "rtt")
}

// HistogramQuery: bucket i counts values v with Edges[i] <= v < Edges[i+1];
// the last bucket is open above and values below Edges[0] count in bucket 0.
// Edges are computed in Go (LogEdges, LinearEdges) and compared as integers
// by both engines, so counts are exact and equal.
type HistogramQuery struct {
	Kind      Kind // default Transactions
	Range     TimeRange
	Class     string // "" = every class, one histogram each
	Sensor    string // "" = every sensor
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
	Sensor    string // "" = every sensor
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

// ClassCounters is one class's Counters.
type ClassCounters struct {
	Class    string
	Counters Counters
}

// TopQuery ranks keys by mean total time (integer ns, sum/count rounded
// down), ties by key. A URL's key is the (host, url) pair, shown as host +
// url; ties order by host, then url.
type TopQuery struct {
	Kind     Kind
	Range    TimeRange
	Class    string
	Sensor   string // "" = every sensor
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
	// ID picks one record by its id: a pageview's object links to its
	// transaction this way.
	ID string
	// Component (default "total") within [ComponentMin, ComponentMax)
	// ns, 0 meaning unbounded: a bucket of the overview's histogram, or
	// "Tserver from 200 to 400 ms". The upper bound is exclusive, as a
	// histogram bucket's is.
	Component                  string
	ComponentMin, ComponentMax int64
	// Sensor keeps one sensor's records ("" = every sensor): one front
	// end's view where several write into one store.
	Sensor string
	Offset int
	Limit  int // default 50, at most 10000
}

// SearchResult holds one page; Total counts all matches.
type SearchResult struct {
	Total        int64
	Transactions []*reconstruct.Transaction
	Pageviews    []*pageview.Pageview
}

// ConnectionSearch selects one page of the connections of Range (by
// FirstSeen), ordered as Search orders its matches: newest first, ties by
// id ascending.
type ConnectionSearch struct {
	Range  TimeRange
	Sensor string // "" = every sensor
	Offset int
	Limit  int // default 50, at most 10000
}

// ConnectionResult holds one page; Total counts all connections in range.
type ConnectionResult struct {
	Total       int64
	Connections []*reconstruct.Connection
}

// PageviewDetail is one pageview, exactly the transactions stored with its
// id as PageviewID (ordered by Start, then ID), and those transactions'
// connections (ordered by FirstSeen, then ID).
type PageviewDetail struct {
	Pageview     *pageview.Pageview
	Transactions []*reconstruct.Transaction
	Connections  []*reconstruct.Connection
}

// Extent is the size and time span of one kind's records: First and Last
// are the oldest and newest start_ns (0 when N is 0).
type Extent struct {
	N           int64
	First, Last int64
}

// SumQuery selects records for ComponentSums.
type SumQuery struct {
	Kind   Kind
	Range  TimeRange
	Class  string // "" = every class, one row each
	Sensor string // "" = every sensor
}

// ComponentSums is one class's record count and the exact sum (ns) of
// each of Components(kind). A record's breakdown components add up to its
// total, so their sums add up to the total's: Sums[c]/Count is an additive
// mean breakdown, which percentiles of the components are not.
type ComponentSums struct {
	Class string
	Count int64
	Sums  map[string]int64
}

// SummaryQuery asks for what the overview shows, answered from the
// per-minute rollups (see rollup.go) instead of scans of the records.
type SummaryQuery struct {
	Kind  Kind // transactions (default) or pageviews
	Range TimeRange
	Class string // "" = every class
	// Edges of the histogram of total: each edge after the first must be
	// one of RollupEdges (the first bounds nothing: bucket 0 is open below).
	Edges []int64
	Qs    []float64     // percentiles of total; none = no percentiles
	Step  time.Duration // series step, a multiple of a minute; 0 = no series
	// Sensor keeps one sensor's records ("" = every sensor), from its own
	// rollup rows.
	Sensor string
	// BySensor also answers Qs per sensor and class (Summary.BySensor):
	// every sensor's percentiles from one read of the rollups.
	BySensor bool
}

// Summary is the overview of one range. Counts, sums, counters and
// histograms are exact; Percentiles and Series values are within
// RollupRelError of the exact percentile (see rollup.go).
type Summary struct {
	Classes     []string // classes with records of any kind in range (Class not applied)
	Histograms  []ClassHistogram
	Percentiles []ClassPercentiles
	Series      []SeriesPoint
	Sums        []ComponentSums
	Counters    Counters
	// ByClass is Counters per class of Classes (Class applied), sorted.
	ByClass []ClassCounters
	// Recomputed counts the minutes whose rollups were stale and were
	// recomputed from the records for this answer.
	Recomputed int
	// BySensor: with SummaryQuery.BySensor, the percentiles of each
	// sensor's classes (Class applied), sensors sorted.
	BySensor []SensorPercentiles
}

// SensorPercentiles is one sensor's ClassPercentiles.
type SensorPercentiles struct {
	Sensor  string
	Classes []ClassPercentiles
}

// SensorCounts is one sensor's share of a range: the records it stored of
// each kind and the span of its transactions' start times (0 when it
// stored none).
type SensorCounts struct {
	Sensor       string `json:"sensor"`
	Connections  int64  `json:"connections"`
	Transactions int64  `json:"transactions"`
	Pageviews    int64  `json:"pageviews"`
	First        int64  `json:"first"`
	Last         int64  `json:"last"`
}

// MaxSensors bounds the sensors Sensors lists (the most active first).
const MaxSensors = 256
