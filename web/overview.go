package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/store/query"
	"golang.org/x/sync/errgroup"
)

// Histogram buckets: 0 (below 1 ms), then log-spaced, 20 per decade from
// 1 ms to 100 s, so the 1 s and 3 s SYN-retransmission peaks fall in
// narrow buckets of their own.
var histEdges = query.LogEdges(int64(time.Millisecond), int64(100*time.Second), 100)

// Quantiles shown everywhere.
var quantiles = []float64{0.5, 0.9, 0.99}

// Overview is everything the overview page shows, in one response so the
// page renders at once. Durations and times are ns.
type Overview struct {
	Kind      query.Kind `json:"kind"`
	Component string     `json:"component"`
	Class     string     `json:"class"`
	// Sensor: one front end's records only ("" all), from its own rollup
	// rows where the rollups answer.
	Sensor      string                    `json:"sensor,omitempty"`
	Range       query.TimeRange           `json:"range"`
	Span        [2]int64                  `json:"span"` // effective [from, to) of the charts
	Extent      extent                    `json:"extent"`
	Classes     []string                  `json:"classes"` // all classes in range, for the picker
	Quantiles   []float64                 `json:"quantiles"`
	Histograms  []query.ClassHistogram    `json:"histograms"`
	Percentiles []query.ClassPercentiles  `json:"percentiles"`
	SeriesStep  int64                     `json:"series_step"`
	Series      []query.SeriesPoint       `json:"series"`
	Breakdown   []Breakdown               `json:"breakdown"`
	Counters    query.Counters            `json:"counters"`
	Top         map[string][]query.TopRow `json:"top"`
	// Approx is 0 when every number is exact, else the bound on the
	// percentiles' relative error (they came from rollups).
	Approx float64 `json:"approx"`
	// MissingShards: a ClickHouse cluster's shards that were down, whose
	// clients' records these numbers lack (see partial.go).
	MissingShards []int             `json:"missing_shards,omitempty"`
	Pipeline      *PipelineStats    `json:"pipeline,omitempty"` // live only
	Store         query.WriterStats `json:"store"`
	StoreState    string            `json:"store_state,omitempty"` // see storeState
}

// Breakdown is one class's mean of each component (ns, sum/count rounded
// down). The components of a record add up to its total, so the means add
// up to the mean total (to within rounding): a stacked bar that means
// something, unlike stacked percentiles. Percentiles of one component are
// on the page too, by picking it as the component.
type Breakdown struct {
	Class string           `json:"class"`
	Count int64            `json:"count"`
	Mean  map[string]int64 `json:"mean"`
}

// breakdownComponents are the parts a record of kind k is made of.
func breakdownComponents(k query.Kind) []string {
	if k == query.Pageviews {
		return export.PageviewParts()
	}
	return export.TransactionParts()
}

type overviewParams struct {
	kind      query.Kind
	class     string
	sensor    string
	component string
	rng       rangeParams
}

// key names the view for the cache: the parameters that shape it, so
// that "&x=1", "&x=2", ... ask for one computation, not one each.
func (p overviewParams) key() string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s", p.kind, p.class, p.component, p.rng.Last, p.rng.From, p.rng.To, p.sensor)
}

func overviewParamsFrom(c *gin.Context) (overviewParams, error) {
	k, err := kindParam(c)
	if err != nil {
		return overviewParams{}, err
	}
	sensor, err := sensorParam(c)
	if err != nil {
		return overviewParams{}, err
	}
	p := overviewParams{kind: k, class: c.Query("class"), sensor: sensor, component: c.DefaultQuery("component", "total"), rng: rangeFrom(c)}
	valid := false
	for _, comp := range query.Components(k) {
		valid = valid || comp == p.component
	}
	if !valid {
		return p, fmt.Errorf("component=%q: want one of %s", p.component, strings.Join(query.Components(k), ", "))
	}
	return p, nil
}

// overview runs the overview's queries concurrently.
func (s *Server) overview(ctx context.Context, p overviewParams) (*Overview, error) {
	st := s.cfg.Store
	ctx, partial := partialContext(ctx, st)
	o, err := s.overviewOf(ctx, st, p)
	if err == nil {
		o.MissingShards = missingShards(partial)
	}
	return o, err
}

func (s *Server) overviewOf(ctx context.Context, st query.Querier, p overviewParams) (*Overview, error) {
	ext, err := dataExtent(ctx, st)
	if err != nil {
		return nil, err
	}
	r, err := p.rng.resolve(ext)
	if err != nil {
		return nil, err
	}
	from, to := span(r, ext)
	step := seriesBucket(from, to)
	o := &Overview{Kind: p.kind, Component: p.component, Class: p.class, Sensor: p.sensor, Range: r, Span: [2]int64{from, to},
		Extent: ext, Quantiles: quantiles, SeriesStep: int64(step), Top: map[string][]query.TopRow{}}
	if s.cfg.Live != nil {
		if ev, ok := s.cfg.Live.Latest(); ok {
			o.Pipeline = &ev.Pipeline
		} else {
			o.Pipeline = &PipelineStats{}
		}
	}
	var sums []query.ComponentSums
	tops := []string{"url", "server", "client"}
	topRows := make([][]query.TopRow, len(tops))
	g, gctx := errgroup.WithContext(ctx)
	if s.useRollups(ext, p, step) {
		o.Approx = query.RollupRelError
		g.Go(func() error {
			sum, err := st.Summary(gctx, query.SummaryQuery{Kind: p.kind, Range: r, Class: p.class, Sensor: p.sensor, Edges: histEdges, Qs: quantiles, Step: step})
			if err != nil {
				return wrap("summary", err)
			}
			o.Classes, o.Histograms, o.Percentiles, o.Series, sums, o.Counters = sum.Classes, sum.Histograms, sum.Percentiles, sum.Series, sum.Sums, sum.Counters
			return nil
		})
	} else {
		s.exactOverview(g, gctx, o, p, r, step, &sums)
	}
	for i, by := range tops {
		g.Go(func() (err error) {
			topRows[i], err = st.TopSlow(gctx, query.TopQuery{Kind: p.kind, Range: r, Class: p.class, Sensor: p.sensor, By: by, Limit: 10})
			return wrap("top "+by, err)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return s.finishOverview(o, tops, topRows, sums), nil
}

// useRollups: the rollups answer the total's distribution over whole
// minutes, when the store keeps them; below ExactBelow transactions exact
// answers are cheap enough. They are kept per sensor, so one sensor's
// overview reads its own rows.
func (s *Server) useRollups(ext extent, p overviewParams, step time.Duration) bool {
	below := s.cfg.ExactBelow
	if below == 0 {
		below = 1_000_000
	}
	return below >= 0 && ext.N >= below && p.component == "total" && step%time.Minute == 0 && s.cfg.Store.Stats().Rollups
}

// exactOverview queries the records themselves.
func (s *Server) exactOverview(g *errgroup.Group, gctx context.Context, o *Overview, p overviewParams, r query.TimeRange, step time.Duration, sums *[]query.ComponentSums) {
	st := s.cfg.Store
	g.Go(func() (err error) {
		o.Classes, err = st.Classes(gctx, r)
		return wrap("classes", err)
	})
	g.Go(func() (err error) {
		o.Histograms, err = st.Histogram(gctx, query.HistogramQuery{Kind: p.kind, Range: r, Class: p.class, Sensor: p.sensor, Component: p.component, Edges: histEdges})
		return wrap("histogram", err)
	})
	g.Go(func() (err error) {
		o.Percentiles, err = st.Percentiles(gctx, query.PercentileQuery{Kind: p.kind, Range: r, Class: p.class, Sensor: p.sensor, Component: p.component, Qs: quantiles})
		return wrap("percentiles", err)
	})
	g.Go(func() (err error) {
		o.Series, err = st.PercentileSeries(gctx, query.PercentileQuery{Kind: p.kind, Range: r, Class: p.class, Sensor: p.sensor, Component: p.component, Qs: quantiles, Bucket: step})
		return wrap("percentile series", err)
	})
	g.Go(func() (err error) {
		*sums, err = st.ComponentSums(gctx, query.SumQuery{Kind: p.kind, Range: r, Class: p.class, Sensor: p.sensor})
		return wrap("breakdown", err)
	})
	g.Go(func() (err error) {
		o.Counters, err = st.SensorCounters(gctx, r, p.class, p.sensor)
		return wrap("counters", err)
	})
}

func (s *Server) finishOverview(o *Overview, tops []string, topRows [][]query.TopRow, sums []query.ComponentSums) *Overview {
	for i, by := range tops {
		o.Top[by] = nonNil(topRows[i])
	}
	o.Classes = nonNil(o.Classes)
	o.Histograms = nonNil(o.Histograms)
	o.Percentiles = nonNil(o.Percentiles)
	o.Series = nonNil(o.Series)
	byClass := map[string]*Breakdown{}
	for _, cs := range sums {
		b := &Breakdown{Class: cs.Class, Count: cs.Count, Mean: map[string]int64{}}
		for comp, sum := range cs.Sums {
			if cs.Count > 0 {
				b.Mean[comp] = sum / cs.Count
			}
		}
		byClass[cs.Class] = b
	}
	o.Breakdown = []Breakdown{}
	for _, cp := range o.Percentiles {
		if b := byClass[cp.Class]; b != nil {
			o.Breakdown = append(o.Breakdown, *b)
		}
	}
	return o
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func (s *Server) apiOverview(c *gin.Context) {
	p, err := overviewParamsFrom(c)
	if err != nil {
		bad(c, err)
		return
	}
	o, err := s.cache.get(c.Request.Context(), p.key(), s.cfg.Store.Stats().Written,
		func(ctx context.Context) (*Overview, error) { return s.overview(ctx, p) })
	if err != nil {
		bad(c, err)
		return
	}
	// The writer's state is of now, not of the cached computation: while
	// inserts fail nothing is written, so the cache would keep a view from
	// before the failure.
	now := *o
	now.Store = s.cfg.Store.Stats()
	now.StoreState = storeState(now.Store)
	c.JSON(http.StatusOK, &now)
}
