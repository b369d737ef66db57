package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store/query"
)

// An objective's threshold is read at the rollup grid edge at or below
// it, and its "le" is the one /metrics writes for that bucket.
func TestSLOBucket(t *testing.T) {
	if got := SLOBucketLE(2 * time.Second); got != "1.995262314" {
		t.Errorf("le of 2s: %s, want 1.995262314 (the grid edge below 2 s, minus 1 ns)", got)
	}
	if got := SLOBucketLE(time.Second); got != "0.999999999" {
		t.Errorf("le of 1s (on the grid): %s", got)
	}
	for _, d := range []time.Duration{time.Millisecond, 250 * time.Millisecond, 1700 * time.Millisecond, 2 * time.Second, time.Hour} {
		if e := sloEdge(d); e > int64(d) || float64(e) < 0.985*float64(d) {
			t.Errorf("%v: edge %d not at or within 1.5%% below it", d, e)
		}
	}
	edges := histogramEdges([]pageview.ClassSLO{{Class: "a", SLO: pageview.SLO{Under: time.Millisecond}}})
	if edges[0] != query.RollupEdges[0] || edges[1] != sloEdge(time.Millisecond) || len(edges) != len(promBuckets)+2 {
		t.Errorf("an objective below every bucket must not take the first edge, which bounds nothing: %v", edges[:3])
	}
}

// /metrics exports the objectives and a histogram bucket at each one's
// threshold that holds the class's records under it.
func TestMetricsSLOs(t *testing.T) {
	st := knownCapture(t)
	slos := []pageview.ClassSLO{
		{Class: "premium", SLO: pageview.SLO{Kind: pageview.SLOTransaction, Under: 1700 * time.Millisecond, Target: 0.95, Window: 30 * 24 * time.Hour}},
		{Class: "premium", SLO: pageview.SLO{Kind: pageview.SLOPageview, Under: 3 * time.Millisecond, Target: 0.999, Window: 7 * 24 * time.Hour}},
	}
	if !st.Stats().Rollups {
		t.Fatal("the known capture's store keeps no rollups: the test wants both read paths")
	}
	// From the rollups and from the records alike.
	for _, q := range []query.Querier{st, rollupsOff{st}} {
		_, ts := newTestServer(t, Config{Store: q, SLOs: slos})
		checkSLOMetrics(t, st, string(readAll(t, get(t, ts.URL+"/metrics"))))
	}
}

func checkSLOMetrics(t *testing.T, st query.Querier, body string) {
	t.Helper()
	le := SLOBucketLE(1700 * time.Millisecond)
	for _, want := range []string{
		`rtmon_slo_objective_ratio{class="premium",kind="transactions",slo="transaction:1700ms:95%:30d"} 0.95`,
		fmt.Sprintf(`rtmon_slo_threshold_seconds{class="premium",kind="transactions",le="%s",slo="transaction:1700ms:95%%:30d"} 1.7`, le),
		`rtmon_slo_window_seconds{class="premium",kind="transactions",slo="transaction:1700ms:95%:30d"} 2.592e+06`,
		`rtmon_slo_objective_ratio{class="premium",kind="pageviews",slo="pageview:3ms:99.9%:7d"} 0.999`,
		fmt.Sprintf(`rtmon_response_time_seconds_bucket{class="premium",kind="pageviews",le="%s"} 0`, SLOBucketLE(3*time.Millisecond)),
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	edge := sloEdge(1700 * time.Millisecond)
	hs, err := st.Histogram(context.Background(), query.HistogramQuery{Kind: query.Transactions, Class: "premium", Edges: []int64{0, edge}})
	if err != nil || len(hs) != 1 {
		t.Fatalf("histogram: %v %v", hs, err)
	}
	under := hs[0].Counts[0]
	if under == 0 || under == hs[0].Total {
		t.Fatalf("premium has %d of %d transactions under %d ns: the test needs both sides", under, hs[0].Total, edge)
	}
	line := fmt.Sprintf(`rtmon_response_time_seconds_bucket{class="premium",kind="transactions",le="%s"} %d`, le, under)
	if !strings.Contains(body, line+"\n") {
		t.Errorf("metrics lack %q", line)
	}
	// The usual buckets stay.
	if !strings.Contains(body, `le="0.999999999"`) {
		t.Error("the 1 s bucket is gone")
	}
}
