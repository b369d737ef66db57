package web

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store/query"
)

// The objectives of the classes file, exported so that rules and
// dashboards read them from rtmon rather than repeat them. Each has the
// labels class, kind (as in rtmon_response_time_seconds: pageviews or
// transactions) and slo (pageview.SLO.ID, e.g. "pageview:2s:95%:30d").
var (
	sloLabels        = []string{"class", "kind", "slo"}
	descSLOObjective = prometheus.NewDesc("rtmon_slo_objective_ratio",
		"Share of the class's records of this kind that its objective wants under the threshold.", sloLabels, nil)
	descSLOThreshold = prometheus.NewDesc("rtmon_slo_threshold_seconds",
		"The objective's threshold; le is the rtmon_response_time_seconds bucket that counts the records under it (the rollup grid edge at or below the threshold, minus 1 ns).",
		append(slices.Clone(sloLabels), "le"), nil)
	descSLOWindow = prometheus.NewDesc("rtmon_slo_window_seconds",
		"The window the objective is counted over.", sloLabels, nil)
)

// SLOKind is the kind label of an objective's records in
// rtmon_response_time_seconds.
func SLOKind(s pageview.SLO) string {
	if s.Kind == pageview.SLOTransaction {
		return string(query.Transactions)
	}
	return string(query.Pageviews)
}

// sloEdge is the rollup grid edge an objective's threshold is read at:
// the one at or below it (within 1.5%), so that a record counted good is
// under the threshold; the objective is at most that much stricter.
func sloEdge(under time.Duration) int64 {
	return query.RollupEdges[query.RollupBucket(int64(under))]
}

// SLOBucketLE is the "le" label of the rtmon_response_time_seconds bucket
// that counts an objective's good records, as /metrics writes it: for 2s,
// the edge 1.995262314 s, whose bucket holds the records below it.
func SLOBucketLE(under time.Duration) string {
	return strconv.FormatFloat(leSeconds(sloEdge(under)), 'g', -1, 64)
}

// leSeconds is the "le" of the bucket below a store edge: a value equal
// to the edge counts in the bucket above it, so le is 1 ns below.
// client_golang writes it with strconv's shortest 'g' form, as
// SLOBucketLE does.
func leSeconds(edge int64) float64 { return float64(edge-1) / 1e9 }

// histogramEdges are promBuckets with each objective's edge added, so
// every objective reads an exact bucket.
func histogramEdges(slos []pageview.ClassSLO) []int64 {
	edges := slices.Clone(promBuckets)
	for _, s := range slos {
		edges = append(edges, sloEdge(s.Under))
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	// The store's first edge bounds nothing (its bucket also holds what
	// is below), so an objective's edge must not be first.
	for _, s := range slos {
		if sloEdge(s.Under) == edges[0] {
			return append([]int64{query.RollupEdges[0]}, edges...)
		}
	}
	return edges
}

// emitSLOs sends the objectives' gauges.
func emitSLOs(ch chan<- prometheus.Metric, slos []pageview.ClassSLO) {
	for _, s := range slos {
		kind, id := SLOKind(s.SLO), s.ID()
		ch <- prometheus.MustNewConstMetric(descSLOObjective, gauge, s.Target, s.Class, kind, id)
		ch <- prometheus.MustNewConstMetric(descSLOThreshold, gauge, s.Under.Seconds(), s.Class, kind, id, SLOBucketLE(s.Under))
		ch <- prometheus.MustNewConstMetric(descSLOWindow, gauge, s.Window.Seconds(), s.Class, kind, id)
	}
}
