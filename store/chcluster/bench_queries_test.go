package chcluster_test

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rtmon/rtmon/store"
	sq "github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/store/storetest"
)

// dashQuery is one kind of query the web UI sends; fn fails when the
// answer is not what the sensors wrote.
type dashQuery struct {
	name, metric string
	fn           func(ctx context.Context, s store.Store) error
}

// What package web asks with (web/overview.go, web/params.go): its
// histogram edges and quantiles, and the series step it picks for a day
// (the smallest of its steps giving at most 120 points).
var (
	webEdges     = sq.LogEdges(int64(time.Millisecond), int64(100*time.Second), 100)
	webQuantiles = []float64{0.5, 0.9, 0.99}
)

func webStep(r sq.TimeRange) time.Duration {
	for _, b := range []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour} {
		if (r.To-r.From)/int64(b) <= 120 {
			return b
		}
	}
	return 3 * time.Hour
}

// want fails unless got == exp.
func want(what string, got, exp int64) error {
	if got != exp {
		return fmt.Errorf("%s = %d, want %d", what, got, exp)
	}
	return nil
}

// total sums f over xs: the record counts of a query's groups.
func total[T any](xs []T, f func(T) int64) (n int64) {
	for _, x := range xs {
		n += f(x)
	}
	return n
}

func pctCount(ps []sq.ClassPercentiles) int64 {
	return total(ps, func(p sq.ClassPercentiles) int64 { return p.Count })
}

// dashboardQueries are the overview (rollup Summary, exact parts for a
// component other than total, top lists), the SLO page's Summary, the
// search page, the sensor panel and a pageview's page, over the whole
// day the sensors wrote, as the UI asks for "all data".
func dashboardQueries(w written) []dashQuery {
	r := sq.TimeRange{From: storetest.T0, To: storetest.T0 + int64(25*time.Hour)}
	step := webStep(r)
	q := []dashQuery{
		{"extent (every page)", "extent", func(ctx context.Context, s store.Store) error {
			e, err := s.Extent(ctx, sq.Transactions)
			if err != nil {
				return err
			}
			return want("extent N", e.N, w.txs)
		}},
		{"overview summary (rollups)", "summary", func(ctx context.Context, s store.Store) error {
			sum, err := s.Summary(ctx, sq.SummaryQuery{Kind: sq.Transactions, Range: r, Edges: webEdges, Qs: webQuantiles, Step: step})
			if err != nil {
				return err
			}
			if err := want("summary transactions", sum.Counters.Transactions, w.txs); err != nil {
				return err
			}
			if err := want("summary pageviews", sum.Counters.Pageviews, w.pvs); err != nil {
				return err
			}
			return want("summary percentile counts", pctCount(sum.Percentiles), w.txs)
		}},
		{"overview summary, pageviews", "summary-pv", func(ctx context.Context, s store.Store) error {
			sum, err := s.Summary(ctx, sq.SummaryQuery{Kind: sq.Pageviews, Range: r, Edges: webEdges, Qs: webQuantiles, Step: step})
			if err != nil {
				return err
			}
			return want("pageview summary counts", pctCount(sum.Percentiles), w.pvs)
		}},
		{"overview summary, one sensor (its rollups)", "summary-sensor", func(ctx context.Context, s store.Store) error {
			id := benchSensors[0].id
			sum, err := s.Summary(ctx, sq.SummaryQuery{Kind: sq.Transactions, Range: r, Sensor: id, Edges: webEdges, Qs: webQuantiles, Step: step})
			if err != nil {
				return err
			}
			if err := want("sensor "+id+" summary transactions", sum.Counters.Transactions, w.bySensor[id]); err != nil {
				return err
			}
			return want("sensor "+id+" summary percentile counts", pctCount(sum.Percentiles), w.bySensor[id])
		}},
		{"slo summary, last 6 h", "slo", func(ctx context.Context, s store.Store) error {
			_, err := s.Summary(ctx, sq.SummaryQuery{Kind: sq.Transactions, Edges: []int64{sq.RollupEdges[0], sq.RollupEdges[800]},
				Range: sq.TimeRange{From: r.To - int64(6*time.Hour), To: r.To}})
			return err
		}},
		{"top slow urls", "top-url", topQuery("url")},
		{"top slow servers", "top-server", topQuery("server")},
		{"top slow clients", "top-client", topQuery("client")},
	}
	return append(q, exactQueries(w, r, step)...)
}

func topQuery(by string) func(ctx context.Context, s store.Store) error {
	return func(ctx context.Context, s store.Store) error {
		rows, err := s.TopSlow(ctx, sq.TopQuery{Kind: sq.Transactions,
			Range: sq.TimeRange{From: storetest.T0, To: storetest.T0 + int64(25*time.Hour)}, By: by, Limit: 10})
		if err == nil && len(rows) == 0 {
			err = fmt.Errorf("top %s: no rows", by)
		}
		return err
	}
}

// exactQueries are what the UI reads from the records themselves: the
// overview for a component other than total, the search page, the sensor
// panel (its list, then each sensor's percentiles) and a pageview's page.
func exactQueries(w written, r sq.TimeRange, step time.Duration) []dashQuery {
	return []dashQuery{
		{"overview histogram, tserver (exact)", "hist", func(ctx context.Context, s store.Store) error {
			hs, err := s.Histogram(ctx, sq.HistogramQuery{Range: r, Component: "tserver", Edges: webEdges})
			if err != nil {
				return err
			}
			return want("histogram total", total(hs, func(h sq.ClassHistogram) int64 { return h.Total }), w.txs)
		}},
		{"overview percentiles, tserver (exact)", "pct", func(ctx context.Context, s store.Store) error {
			ps, err := s.Percentiles(ctx, sq.PercentileQuery{Range: r, Component: "tserver", Qs: webQuantiles})
			if err != nil {
				return err
			}
			return want("percentile counts", pctCount(ps), w.txs)
		}},
		{"overview series, tserver (exact)", "series", func(ctx context.Context, s store.Store) error {
			pts, err := s.PercentileSeries(ctx, sq.PercentileQuery{Range: r, Component: "tserver", Qs: webQuantiles, Bucket: step})
			if err != nil {
				return err
			}
			return want("series counts", total(pts, func(p sq.SeriesPoint) int64 { return p.Count }), w.txs)
		}},
		{"overview breakdown sums (exact)", "sums", func(ctx context.Context, s store.Store) error {
			cs, err := s.ComponentSums(ctx, sq.SumQuery{Range: r})
			if err != nil {
				return err
			}
			n := total(cs, func(c sq.ComponentSums) int64 { return c.Count })
			return want("component sums count", n, w.txs)
		}},
		{"overview counters (exact)", "counters", func(ctx context.Context, s store.Store) error {
			k, err := s.Counters(ctx, r, "")
			if err != nil {
				return err
			}
			return want("counters transactions", k.Transactions, w.txs)
		}},
		{"overview classes (exact)", "classes", func(ctx context.Context, s store.Store) error {
			cs, err := s.Classes(ctx, r)
			if err == nil && len(cs) != 3 {
				err = fmt.Errorf("classes %v, want gold, silver, bronze", cs)
			}
			return err
		}},
		{"search transactions, page 1", "search", func(ctx context.Context, s store.Store) error {
			res, err := s.Search(ctx, sq.SearchQuery{Kind: sq.Transactions, Range: r, Limit: 50})
			if err != nil {
				return err
			}
			return want("search total", res.Total, w.txs)
		}},
		{"search class+url+min total, page 2", "search-filtered", func(ctx context.Context, s store.Store) error {
			res, err := s.Search(ctx, sq.SearchQuery{Kind: sq.Transactions, Range: r, Class: "silver",
				URLContains: "page-4", MinTotal: int64(500 * time.Millisecond), Offset: 50, Limit: 50})
			if err == nil && res.Total == 0 {
				err = fmt.Errorf("filtered search found nothing")
			}
			return err
		}},
		{"search pageviews, page 1", "search-pv", func(ctx context.Context, s store.Store) error {
			res, err := s.Search(ctx, sq.SearchQuery{Kind: sq.Pageviews, Range: r, Limit: 50})
			if err != nil {
				return err
			}
			return want("pageview search total", res.Total, w.pvs)
		}},
		{"sensor panel list", "sensors", func(ctx context.Context, s store.Store) error {
			ss, err := s.Sensors(ctx, r)
			if err != nil {
				return err
			}
			if len(ss) != len(w.bySensor) {
				return fmt.Errorf("%d sensors, want %d", len(ss), len(w.bySensor))
			}
			for _, sc := range ss {
				if err := want("sensor "+sc.Sensor+" transactions", sc.Transactions, w.bySensor[sc.Sensor]); err != nil {
					return err
				}
			}
			return nil
		}},
		{"sensor panel percentiles, one sensor", "sensor-pct", func(ctx context.Context, s store.Store) error {
			id := benchSensors[0].id
			ps, err := s.Percentiles(ctx, sq.PercentileQuery{Range: r, Sensor: id, Component: "total", Qs: webQuantiles})
			if err != nil {
				return err
			}
			return want("sensor "+id+" percentile counts", pctCount(ps), w.bySensor[id])
		}},
		{"sensor panel percentiles, every sensor (rollups)", "sensor-pct-rollups", func(ctx context.Context, s store.Store) error {
			sum, err := s.Summary(ctx, sq.SummaryQuery{Range: r, Qs: webQuantiles, BySensor: true})
			if err != nil {
				return err
			}
			if len(sum.BySensor) != len(w.bySensor) {
				return fmt.Errorf("%d sensors' percentiles, want %d", len(sum.BySensor), len(w.bySensor))
			}
			for _, sp := range sum.BySensor {
				if err := want("sensor "+sp.Sensor+" rollup percentile counts", pctCount(sp.Classes), w.bySensor[sp.Sensor]); err != nil {
					return err
				}
			}
			return nil
		}},
		{"pageview by id", "pageview", func(ctx context.Context, s store.Store) error {
			d, err := s.PageviewByID(ctx, w.pvID)
			if err == nil && len(d.Transactions) == 0 {
				err = fmt.Errorf("pageview %s: no transactions", w.pvID)
			}
			return err
		}},
	}
}

// baselineQueries are no longer sent by the UI: timed to compare with what
// replaced them, and left out of the p95 tally.
func baselineQueries(w written) []dashQuery {
	r := sq.TimeRange{From: storetest.T0, To: storetest.T0 + int64(25*time.Hour)}
	step := webStep(r)
	return []dashQuery{
		{"overview of one sensor read exactly (before schema 9)", "exact-sensor", func(ctx context.Context, s store.Store) error {
			// What the web's exactOverview sends at once: five scans of
			// the sensor's records.
			id := benchSensors[0].id
			g, gctx := errgroup.WithContext(ctx)
			var ps []sq.ClassPercentiles
			g.Go(func() error {
				_, err := s.Histogram(gctx, sq.HistogramQuery{Range: r, Sensor: id, Component: "total", Edges: webEdges})
				return err
			})
			g.Go(func() (err error) {
				ps, err = s.Percentiles(gctx, sq.PercentileQuery{Range: r, Sensor: id, Component: "total", Qs: webQuantiles})
				return err
			})
			g.Go(func() error {
				_, err := s.PercentileSeries(gctx, sq.PercentileQuery{Range: r, Sensor: id, Component: "total", Qs: webQuantiles, Bucket: step})
				return err
			})
			g.Go(func() error {
				_, err := s.ComponentSums(gctx, sq.SumQuery{Range: r, Sensor: id})
				return err
			})
			g.Go(func() error {
				_, err := s.SensorCounters(gctx, r, "", id)
				return err
			})
			if err := g.Wait(); err != nil {
				return err
			}
			return want("sensor "+id+" exact percentile counts", pctCount(ps), w.bySensor[id])
		}},
	}
}
