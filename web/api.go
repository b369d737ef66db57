package web

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/errgroup"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store"
)

// Histogram buckets: 0 (below 1 ms), then log-spaced, 20 per decade from
// 1 ms to 100 s, so the 1 s and 3 s SYN-retransmission peaks fall in
// narrow buckets of their own.
var histEdges = store.LogEdges(int64(time.Millisecond), int64(100*time.Second), 100)

// Quantiles shown everywhere.
var quantiles = []float64{0.5, 0.9, 0.99}

// extent is the time span of stored transactions.
type extent struct {
	From int64 `json:"from"` // oldest start
	To   int64 `json:"to"`   // newest start + 1
	N    int64 `json:"n"`
}

// dataExtent is the span of the stored records: "last 15m" is relative to
// the newest transaction; the oldest transaction or pageview sets where
// the charts' time axis starts.
func dataExtent(ctx context.Context, st store.Querier) (extent, error) {
	var tx, pv store.Extent
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { tx, err = st.Extent(gctx, store.Transactions); return err })
	g.Go(func() (err error) { pv, err = st.Extent(gctx, store.Pageviews); return err })
	if err := g.Wait(); err != nil {
		return extent{}, fmt.Errorf("data extent: %w", err)
	}
	if tx.N == 0 {
		return extent{}, nil
	}
	e := extent{N: tx.N, From: tx.First, To: tx.Last + 1}
	if pv.N > 0 && pv.First < e.From {
		e.From = pv.First
	}
	return e, nil
}

// rangeParams is the time selection shared by every page, as in the URL:
// last=15m (relative to the newest record), or from/to (RFC 3339, a
// datetime-local value taken as UTC, or ns since the epoch).
type rangeParams struct {
	Last     string
	From, To string
}

func rangeFrom(c *gin.Context) rangeParams {
	return rangeParams{Last: c.Query("last"), From: c.Query("from"), To: c.Query("to")}
}

func parseTime(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixNano(), nil
		}
	}
	return 0, fmt.Errorf("time %q: want RFC 3339, YYYY-MM-DDTHH:MM or ns since the epoch", s)
}

// resolve turns the parameters into a store range; ext is needed for
// "last" and for bounding "all" (charts need a finite span).
func (p rangeParams) resolve(ext extent) (store.TimeRange, error) {
	var r store.TimeRange
	if p.Last != "" && p.Last != "all" {
		d, err := parseLast(p.Last)
		if err != nil || d <= 0 {
			return r, fmt.Errorf("last=%q: want a duration such as 15m or all", p.Last)
		}
		// Open above: records newer than the newest transaction (a
		// connection that never carried one) belong to "the last 15 min" too.
		return store.TimeRange{From: ext.To - int64(d)}, nil
	}
	var err error
	if r.From, err = parseTime(p.From); err != nil {
		return r, err
	}
	if r.To, err = parseTime(p.To); err != nil {
		return r, err
	}
	if r.To != 0 && r.To <= r.From {
		return r, errors.New("the time range ends before it starts")
	}
	return r, nil
}

// parseLast reads a Go duration, or whole days as "7d" (Go has no d unit).
func parseLast(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("days %q: %w", s, err)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// span is the effective [from, to) for charts: open ends clamp to the data.
func span(r store.TimeRange, ext extent) (int64, int64) {
	from, to := r.From, r.To
	if from == 0 || from < ext.From {
		from = ext.From
	}
	if to == 0 || to > ext.To {
		to = ext.To
	}
	if to <= from {
		to = from + 1
	}
	return from, to
}

var seriesBuckets = []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour, 24 * time.Hour}

// seriesBucket picks the smallest nice bucket giving at most 120 points.
func seriesBucket(from, to int64) time.Duration {
	for _, b := range seriesBuckets {
		if (to-from)/int64(b) <= 120 {
			return b
		}
	}
	return seriesBuckets[len(seriesBuckets)-1]
}

func kindParam(c *gin.Context) (store.Kind, error) {
	switch k := c.Query("kind"); k {
	case "", "transactions":
		return store.Transactions, nil
	case "pageviews":
		return store.Pageviews, nil
	default:
		return "", fmt.Errorf("kind=%q: want transactions or pageviews", k)
	}
}

func bad(c *gin.Context, err error) {
	c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": err.Error()})
}

// pageviewByID reads pageview id; if it cannot, it answers 404 (no such
// pageview) or 500 and returns false.
func (s *Server) pageviewByID(c *gin.Context, id string) (*store.PageviewDetail, bool) {
	det, err := s.cfg.Store.PageviewByID(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": err.Error()})
		return nil, false
	}
	if err != nil {
		fail(c, err)
		return nil, false
	}
	return det, true
}

func fail(c *gin.Context, err error) {
	c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": err.Error()})
}

// metaResponse is what every page needs first; it stays cheap (no extent)
// because the page's own query waits for it.
type metaResponse struct {
	Title   string   `json:"title"`
	Classes []string `json:"classes"`
	Live    bool     `json:"live"`
	// Components per kind, for the component picker.
	Components map[store.Kind][]string `json:"components"`
}

func (s *Server) apiMeta(c *gin.Context) {
	classes, err := s.cfg.Store.Classes(c.Request.Context(), store.TimeRange{})
	if err != nil {
		fail(c, fmt.Errorf("classes: %w", err))
		return
	}
	c.JSON(http.StatusOK, metaResponse{Title: s.cfg.Title, Classes: nonNil(classes), Live: s.cfg.Live != nil,
		Components: map[store.Kind][]string{store.Transactions: store.Components(store.Transactions), store.Pageviews: store.Components(store.Pageviews)}})
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// Overview is everything the overview page shows, in one response so the
// page renders at once. Durations and times are ns.
type Overview struct {
	Kind        store.Kind                `json:"kind"`
	Component   string                    `json:"component"`
	Class       string                    `json:"class"`
	Range       store.TimeRange           `json:"range"`
	Span        [2]int64                  `json:"span"` // effective [from, to) of the charts
	Extent      extent                    `json:"extent"`
	Classes     []string                  `json:"classes"` // all classes in range, for the picker
	Quantiles   []float64                 `json:"quantiles"`
	Histograms  []store.ClassHistogram    `json:"histograms"`
	Percentiles []store.ClassPercentiles  `json:"percentiles"`
	SeriesStep  int64                     `json:"series_step"`
	Series      []store.SeriesPoint       `json:"series"`
	Breakdown   []Breakdown               `json:"breakdown"`
	Counters    store.Counters            `json:"counters"`
	Top         map[string][]store.TopRow `json:"top"`
	// Approx is 0 when every number is exact, else the bound on the
	// percentiles' relative error (they came from rollups).
	Approx   float64           `json:"approx"`
	Pipeline *PipelineStats    `json:"pipeline,omitempty"` // live only
	Store    store.WriterStats `json:"store"`
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
func breakdownComponents(k store.Kind) []string {
	if k == store.Pageviews {
		return export.PageviewParts()
	}
	return export.TransactionParts()
}

type overviewParams struct {
	kind      store.Kind
	class     string
	component string
	rng       rangeParams
}

func overviewParamsFrom(c *gin.Context) (overviewParams, error) {
	k, err := kindParam(c)
	if err != nil {
		return overviewParams{}, err
	}
	p := overviewParams{kind: k, class: c.Query("class"), component: c.DefaultQuery("component", "total"), rng: rangeFrom(c)}
	valid := false
	for _, comp := range store.Components(k) {
		valid = valid || comp == p.component
	}
	if !valid {
		return p, fmt.Errorf("component=%q: want one of %s", p.component, strings.Join(store.Components(k), ", "))
	}
	return p, nil
}

// overview runs the overview's queries concurrently.
func (s *Server) overview(ctx context.Context, p overviewParams) (*Overview, error) {
	st := s.cfg.Store
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
	o := &Overview{Kind: p.kind, Component: p.component, Class: p.class, Range: r, Span: [2]int64{from, to},
		Extent: ext, Quantiles: quantiles, SeriesStep: int64(step), Top: map[string][]store.TopRow{}, Store: st.Stats()}
	if s.cfg.Live != nil {
		if ev, ok := s.cfg.Live.Latest(); ok {
			o.Pipeline = &ev.Pipeline
		} else {
			o.Pipeline = &PipelineStats{}
		}
	}
	var sums []store.ComponentSums
	tops := []string{"url", "server", "client"}
	topRows := make([][]store.TopRow, len(tops))
	g, gctx := errgroup.WithContext(ctx)
	if s.useRollups(ext, p, step) {
		o.Approx = store.RollupRelError
		g.Go(func() error {
			sum, err := st.Summary(gctx, store.SummaryQuery{Kind: p.kind, Range: r, Class: p.class, Edges: histEdges, Qs: quantiles, Step: step})
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
			topRows[i], err = st.TopSlow(gctx, store.TopQuery{Kind: p.kind, Range: r, Class: p.class, By: by, Limit: 10})
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
// answers are cheap enough.
func (s *Server) useRollups(ext extent, p overviewParams, step time.Duration) bool {
	below := s.cfg.ExactBelow
	if below == 0 {
		below = 1_000_000
	}
	return below >= 0 && ext.N >= below && p.component == "total" && step%time.Minute == 0 && s.cfg.Store.Stats().Rollups
}

// exactOverview queries the records themselves.
func (s *Server) exactOverview(g *errgroup.Group, gctx context.Context, o *Overview, p overviewParams, r store.TimeRange, step time.Duration, sums *[]store.ComponentSums) {
	st := s.cfg.Store
	g.Go(func() (err error) {
		o.Classes, err = st.Classes(gctx, r)
		return wrap("classes", err)
	})
	g.Go(func() (err error) {
		o.Histograms, err = st.Histogram(gctx, store.HistogramQuery{Kind: p.kind, Range: r, Class: p.class, Component: p.component, Edges: histEdges})
		return wrap("histogram", err)
	})
	g.Go(func() (err error) {
		o.Percentiles, err = st.Percentiles(gctx, store.PercentileQuery{Kind: p.kind, Range: r, Class: p.class, Component: p.component, Qs: quantiles})
		return wrap("percentiles", err)
	})
	g.Go(func() (err error) {
		o.Series, err = st.PercentileSeries(gctx, store.PercentileQuery{Kind: p.kind, Range: r, Class: p.class, Component: p.component, Qs: quantiles, Bucket: step})
		return wrap("percentile series", err)
	})
	g.Go(func() (err error) {
		*sums, err = st.ComponentSums(gctx, store.SumQuery{Kind: p.kind, Range: r, Class: p.class})
		return wrap("breakdown", err)
	})
	g.Go(func() (err error) {
		o.Counters, err = st.Counters(gctx, r, p.class)
		return wrap("counters", err)
	})
}

func (s *Server) finishOverview(o *Overview, tops []string, topRows [][]store.TopRow, sums []store.ComponentSums) *Overview {
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
	o, err := s.cache.get(c.Request.Context(), c.Request.URL.RawQuery, s.cfg.Store.Stats().Written,
		func(ctx context.Context) (*Overview, error) { return s.overview(ctx, p) })
	if err != nil {
		bad(c, err)
		return
	}
	c.JSON(http.StatusOK, o)
}

// searchParams parses the search filters; minimum response time is in ms
// in the URL (what people type), ns in the store.
func searchParams(c *gin.Context, ext func() (extent, error)) (store.SearchQuery, error) {
	var q store.SearchQuery
	var err error
	if q.Kind, err = kindParam(c); err != nil {
		return q, err
	}
	rp := rangeFrom(c)
	var e extent
	if rp.Last != "" && rp.Last != "all" {
		if e, err = ext(); err != nil {
			return q, err
		}
	}
	if q.Range, err = rp.resolve(e); err != nil {
		return q, err
	}
	q.Client = strings.TrimSpace(c.Query("client"))
	q.Class = c.Query("class")
	q.URLContains = c.Query("url")
	if v := c.Query("status"); v != "" {
		if q.Status, err = strconv.Atoi(v); err != nil || q.Status < 100 || q.Status > 999 {
			return q, fmt.Errorf("status=%q: want an HTTP status code", v)
		}
	}
	if v := c.Query("min"); v != "" {
		ms, err := strconv.ParseFloat(v, 64)
		if err != nil || ms < 0 || math.IsInf(ms, 0) || math.IsNaN(ms) {
			return q, fmt.Errorf("min=%q: want milliseconds", v)
		}
		q.MinTotal = int64(ms * 1e6)
	}
	if v := c.Query("limit"); v != "" {
		if q.Limit, err = strconv.Atoi(v); err != nil || q.Limit < 1 || q.Limit > 1000 {
			return q, fmt.Errorf("limit=%q: want 1-1000", v)
		}
	} else {
		q.Limit = 50
	}
	if v := c.Query("page"); v != "" {
		page, err := strconv.Atoi(v)
		if err != nil || page < 1 {
			return q, fmt.Errorf("page=%q: want 1, 2, ...", v)
		}
		q.Offset = (page - 1) * q.Limit
	}
	return q, nil
}

// SearchResponse is one page of search results.
type SearchResponse struct {
	Kind         store.Kind                 `json:"kind"`
	Total        int64                      `json:"total"`
	Offset       int                        `json:"offset"`
	Limit        int                        `json:"limit"`
	Transactions []*reconstruct.Transaction `json:"transactions,omitempty"`
	Pageviews    []*pageview.Pageview       `json:"pageviews,omitempty"`
	// Links[i] leads from Transactions[i] to its pageview; built here
	// because a start time in ns is not exact as a JavaScript number.
	Links []string `json:"links,omitempty"`
}

func (s *Server) apiSearch(c *gin.Context) {
	ctx := c.Request.Context()
	q, err := searchParams(c, func() (extent, error) { return dataExtent(ctx, s.cfg.Store) })
	if err != nil {
		bad(c, err)
		return
	}
	res, err := s.cfg.Store.Search(ctx, q)
	if err != nil {
		bad(c, fmt.Errorf("search: %w", err))
		return
	}
	out := SearchResponse{Kind: q.Kind, Total: res.Total, Offset: q.Offset, Limit: q.Limit, Transactions: res.Transactions, Pageviews: res.Pageviews}
	for _, t := range res.Transactions {
		out.Links = append(out.Links, txPageviewLink(t))
	}
	if q.Kind == store.Transactions {
		out.Transactions = nonNil(out.Transactions)
	} else {
		out.Pageviews = nonNil(out.Pageviews)
	}
	c.JSON(http.StatusOK, out)
}

func (s *Server) apiPageview(c *gin.Context) {
	det, ok := s.pageviewByID(c, c.Param("id"))
	if !ok {
		return
	}
	det.Transactions = nonNil(det.Transactions)
	det.Connections = nonNil(det.Connections)
	c.JSON(http.StatusOK, pageviewResponse(det))
}

// PageviewResponse adds offsets from T0 (the earliest start) to the stored
// pageview: ns since the epoch exceed JavaScript's exact integers, so the
// waterfall is laid out from these small exact numbers instead.
type PageviewResponse struct {
	*store.PageviewDetail
	T0       int64               `json:"t0"`
	Pageview [2]int64            `json:"pv_offsets"` // pageview start, end - T0
	Offsets  map[string][2]int64 `json:"offsets"`    // transaction id -> start, end - T0
}

func pageviewResponse(det *store.PageviewDetail) PageviewResponse {
	t0 := det.Pageview.Start
	for _, t := range det.Transactions {
		t0 = min(t0, t.Start)
	}
	r := PageviewResponse{PageviewDetail: det, T0: t0, Pageview: [2]int64{det.Pageview.Start - t0, det.Pageview.End - t0},
		Offsets: make(map[string][2]int64, len(det.Transactions))}
	for _, t := range det.Transactions {
		r.Offsets[t.ID] = [2]int64{t.Start - t0, t.End - t0}
	}
	return r
}

func txPageviewLink(t *reconstruct.Transaction) string {
	return "/tx/pageview?" + url.Values{"client": {t.Client.String()}, "start": {strconv.FormatInt(t.Start, 10)},
		"iface": {strconv.Itoa(t.Interface)}}.Encode()
}

// txPageview redirects from a transaction (client, interface, start) to the
// stored pageview containing it: transactions carry no pageview id.
func (s *Server) txPageview(c *gin.Context) {
	client, err := netip.ParseAddr(c.Query("client"))
	if err != nil {
		s.errorPage(c, http.StatusBadRequest, "Bad link", "client must be an IP address.")
		return
	}
	start, err := strconv.ParseInt(c.Query("start"), 10, 64)
	if err != nil {
		s.errorPage(c, http.StatusBadRequest, "Bad link", "start must be ns since the epoch.")
		return
	}
	iface, _ := strconv.Atoi(c.DefaultQuery("iface", "0"))
	res, err := s.cfg.Store.Search(c.Request.Context(), store.SearchQuery{Kind: store.Pageviews, Client: client.String(),
		Range: store.TimeRange{From: start - int64(time.Hour), To: start + 1}, Limit: 200})
	if err != nil {
		s.errorPage(c, http.StatusInternalServerError, "Search failed", err.Error())
		return
	}
	for _, pv := range res.Pageviews {
		if pv.Interface == iface && pv.Start <= start && start <= pv.End {
			c.Redirect(http.StatusSeeOther, "/pageview/"+url.PathEscape(pv.ID))
			return
		}
	}
	s.errorPage(c, http.StatusNotFound, "No pageview", "This transaction is not part of a stored pageview (a stand-alone request, or its pageview was not stored).")
}

// apiLive streams the live feed as server-sent events.
func (s *Server) apiLive(c *gin.Context) {
	if s.cfg.Live == nil {
		c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"error": "not live: this server shows a stored capture"})
		return
	}
	ch, first, cancel := s.cfg.Live.subscribe()
	defer cancel()
	w := c.Writer
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(js []byte) bool {
		if _, err := fmt.Fprintf(w, "event: live\ndata: %s\n\n", js); err != nil {
			return false
		}
		w.Flush()
		return true
	}
	if first != nil && !send(first) {
		return
	}
	w.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	ctx := c.Request.Context()
	for {
		select {
		case <-ctx.Done():
			return
		case js := <-ch:
			if !send(js) {
				return
			}
		case <-keep.C:
			// A comment keeps proxies from closing an idle stream.
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			w.Flush()
		}
	}
}
