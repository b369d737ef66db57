package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store"
)

// qs are the quantiles every percentile check asks for.
var qs = []float64{0, 0.25, 0.5, 0.9, 0.95, 0.99, 1}

// checkQueries compares every query of s with the reference's answer.
func checkQueries(t *testing.T, s store.Store, ref *Ref) {
	for _, r := range ranges() {
		for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
			checkDistributions(t, s, ref, r, k)
		}
		checkCounters(t, s, ref, r)
		checkSummaries(t, s, ref, r)
	}
	checkExtents(t, s, ref)
	// Sanity on the data itself: every class has data, so the checks above
	// compared non-trivial answers.
	if c := ref.Counters(ranges()[0], "gold"); c.Transactions < 1000 || c.SYNLosses == 0 || c.IncompleteTx == 0 {
		t.Fatalf("synthetic data too thin: %+v", c)
	}
	checkSearches(t, s, ref)
	checkConnectionSearches(t, s, ref)
	checkPageviews(t, s, ref)
}

// checkDistributions: histograms, percentiles, the percentile series and
// the slowest keys of kind k over r.
func checkDistributions(t *testing.T, s store.Store, ref *Ref, r store.TimeRange, k store.Kind) {
	ctx := context.Background()
	edgeSets := [][]int64{store.LogEdges(1e5, 1e10, 40), store.LinearEdges(50e6, 20), {0}}
	for _, class := range []string{"", "gold"} {
		for _, c := range store.Components(k) {
			for _, e := range edgeSets {
				q := store.HistogramQuery{Kind: k, Range: r, Class: class, Component: c, Edges: e}
				got, err := s.Histogram(ctx, q)
				if err != nil {
					t.Fatalf("Histogram(%+v): %v", q, err)
				}
				same(t, "Histogram "+string(k)+" "+c, got, ref.Histogram(q))
			}
			pq := store.PercentileQuery{Kind: k, Range: r, Class: class, Component: c, Qs: qs}
			got, err := s.Percentiles(ctx, pq)
			if err != nil {
				t.Fatalf("Percentiles(%+v): %v", pq, err)
			}
			same(t, "Percentiles "+string(k)+" "+c, got, ref.Percentiles(pq))
		}
		pq := store.PercentileQuery{Kind: k, Range: r, Class: class, Component: "total", Qs: qs, Bucket: time.Hour}
		got, err := s.PercentileSeries(ctx, pq)
		if err != nil {
			t.Fatalf("PercentileSeries: %v", err)
		}
		same(t, "PercentileSeries "+string(k), got, ref.PercentileSeries(pq))
		for _, by := range []string{"url", "server", "client"} {
			tq := store.TopQuery{Kind: k, Range: r, Class: class, By: by, Limit: 10, MinCount: 2}
			got, err := s.TopSlow(ctx, tq)
			if err != nil {
				t.Fatalf("TopSlow(%+v): %v", tq, err)
			}
			same(t, "TopSlow "+by, got, ref.TopSlow(tq))
		}
	}
}

// checkCounters: the counters of each class, and the classes of r.
func checkCounters(t *testing.T, s store.Store, ref *Ref, r store.TimeRange) {
	ctx := context.Background()
	for _, class := range []string{"", "gold", "silver", "bronze", "none"} {
		got, err := s.Counters(ctx, r, class)
		if err != nil {
			t.Fatalf("Counters: %v", err)
		}
		same(t, "Counters "+class, got, ref.Counters(r, class))
	}
	got, err := s.Classes(ctx, r)
	if err != nil {
		t.Fatalf("Classes: %v", err)
	}
	if got == nil {
		got = []string{}
	}
	same(t, "Classes", got, ref.Classes(r))
}

// checkSummaries: the overview and the component sums of r.
func checkSummaries(t *testing.T, s store.Store, ref *Ref, r store.TimeRange) {
	ctx := context.Background()
	for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
		for _, class := range []string{"", "gold", "none"} {
			for _, step := range []time.Duration{0, time.Minute, time.Hour} {
				q := store.SummaryQuery{Kind: k, Range: r, Class: class, Edges: store.LogEdges(1e6, 1e11, 100), Qs: qs, Step: step}
				got, err := s.Summary(ctx, q)
				if err != nil {
					t.Fatalf("Summary(%+v): %v", q, err)
				}
				got.Recomputed = 0
				same(t, fmt.Sprintf("Summary %s %q step %v", k, class, step), got, ref.Summary(q))
			}
			sq := store.SumQuery{Kind: k, Range: r, Class: class}
			got, err := s.ComponentSums(ctx, sq)
			if err != nil {
				t.Fatalf("ComponentSums(%+v): %v", sq, err)
			}
			same(t, "ComponentSums "+string(k)+" "+class, got, ref.ComponentSums(sq))
		}
	}
}

// checkExtents: the first and last start of each kind.
func checkExtents(t *testing.T, s store.Store, ref *Ref) {
	ctx := context.Background()
	for _, k := range []store.Kind{store.Transactions, store.Pageviews} {
		got, err := s.Extent(ctx, k)
		if err != nil {
			t.Fatalf("Extent(%s): %v", k, err)
		}
		want := ref.Extent(k)
		if want.N == 0 {
			t.Fatalf("Extent(%s): reference has no records", k)
		}
		same(t, "Extent "+string(k), got, want)
	}
}

// checkSearches: filters of every form, pages of results.
func checkSearches(t *testing.T, s store.Store, ref *Ref) {
	ctx := context.Background()
	searches := []store.SearchQuery{
		{Range: ranges()[0], Limit: 20},
		{Range: ranges()[0], Limit: 20, Offset: 20},
		{Range: ranges()[1], Client: "10.1.0.0/16", Limit: 30, Offset: 5},
		{Range: ranges()[0], Client: "10.2.*.*", Status: 500},
		{Range: ranges()[0], Client: "2001:db8::/32", URLContains: "page-1"},
		{Range: ranges()[0], Client: ref.Txs[10].Client.String()},
		// The forms classes and what-if rules take, read the same way.
		{Range: ranges()[0], Client: "10.*.0.*"},
		{Range: ranges()[0], Client: "IP.SRC != 10.2.*.*"},
		{Range: ranges()[0], Client: "::ffff:10.1.0.0/112"},
		{Range: ranges()[0], Client: "!= 2001:db8::/32"},
		{Range: ranges()[0], Client: "::/0"},
		{Kind: store.Pageviews, Range: ranges()[0], Client: "*"},
		{Range: ranges()[0], Class: "silver", MinTotal: 200e6, Limit: 7, Offset: 3},
		{Range: ranges()[0], URLContains: "ünïcode"},
		{Range: ranges()[0], URLContains: "100%25"},
		{Kind: store.Pageviews, Range: ranges()[0], Class: "gold", MinTotal: 100e6, Limit: 15},
		{Kind: store.Pageviews, Range: ranges()[1], Client: "198.51.100.0/24", Status: 404},
		// A component's range (a histogram bucket: lower bound inclusive,
		// upper exclusive), one record by id.
		{Range: ranges()[0], Component: "tserver", ComponentMin: 20e6, ComponentMax: 400e6},
		{Range: ranges()[0], Class: "silver", ComponentMax: 300e6, Limit: 9, Offset: 2},
		{Range: ranges()[0], Component: "rtt", ComponentMin: 1e6},
		{Kind: store.Pageviews, Range: ranges()[0], Component: "tconn", ComponentMin: 1, ComponentMax: 2e9},
		{ID: ref.Txs[10].ID},
		{Kind: store.Pageviews, ID: ref.Pvs[3].ID},
	}
	for _, sq := range searches {
		got, err := s.Search(ctx, sq)
		if err != nil {
			t.Fatalf("Search(%+v): %v", sq, err)
		}
		want := ref.Search(sq)
		if want.Total == 0 && sq.Status == 0 && sq.Offset == 0 {
			t.Errorf("search %+v matches nothing in the reference; pick a better filter", sq)
		}
		same(t, "Search total", got.Total, want.Total)
		same(t, "Search transactions", normTx(got.Transactions), normTx(want.Transactions))
		same(t, "Search pageviews", normPv(got.Pageviews), normPv(want.Pageviews))
	}
}

// checkConnectionSearches: pages of the connections of a range, the
// bulk read the what-if loads them with.
func checkConnectionSearches(t *testing.T, s store.Store, ref *Ref) {
	ctx := context.Background()
	searches := []store.ConnectionSearch{
		{Range: ranges()[0]},
		{Range: ranges()[0], Limit: 20, Offset: 20},
		{Range: ranges()[1], Limit: 10000},
		{Range: ranges()[2], Limit: 300, Offset: 100},
		{Range: ranges()[3], Limit: 100},
		{Range: ranges()[4]},
		{Range: store.TimeRange{}, Limit: 10, Offset: len(ref.Conns) - 5},
	}
	for i, cq := range searches {
		got, err := s.SearchConnections(ctx, cq)
		if err != nil {
			t.Fatalf("SearchConnections(%+v): %v", cq, err)
		}
		want := ref.SearchConnections(cq)
		if i < 4 && len(want.Connections) == 0 {
			t.Errorf("connection search %+v finds nothing in the reference; pick a better range", cq)
		}
		same(t, "SearchConnections total", got.Total, want.Total)
		same(t, "SearchConnections", normConn(got.Connections), normConn(want.Connections))
	}
	// A page is at most 10000, as Search's.
	all, err := s.SearchConnections(ctx, store.ConnectionSearch{Range: ranges()[0], Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	want := ref.SearchConnections(store.ConnectionSearch{Range: ranges()[0], Limit: 10000})
	same(t, "SearchConnections over the largest page", normConn(all.Connections), normConn(want.Connections))
}

// checkPageviews: pageviews by id with their transactions and connections.
func checkPageviews(t *testing.T, s store.Store, ref *Ref) {
	ctx := context.Background()
	for _, i := range []int{0, 17, len(ref.Pvs) - 1} {
		id := ref.Pvs[i].ID
		got, err := s.PageviewByID(ctx, id)
		if err != nil {
			t.Fatalf("PageviewByID(%s): %v", id, err)
		}
		want := ref.PageviewByID(id)
		same(t, "Pageview", normPv([]*pageview.Pageview{got.Pageview}), normPv([]*pageview.Pageview{want.Pageview}))
		same(t, "Pageview transactions", normTx(got.Transactions), normTx(want.Transactions))
		same(t, "Pageview connections", normConn(got.Connections), normConn(want.Connections))
		if len(got.Transactions) == 0 || len(got.Connections) == 0 {
			t.Errorf("pageview %s came back without transactions or connections", id)
		}
	}
}
