package web

// The objectives on the overview: per class objective, its attainment over
// its window and the error budget's burn rate over 1 h, 6 h and 3 d, the
// windows of the burn-rate alerts `rtmon rules` writes. The counts come
// from the store's rollups (query.Summary: exact counts at the objective's
// grid edge), so a 30-day window costs what a minute does.

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/store/query"
)

// sloBurnWindows are the burn-rate windows shown, those of the alerts.
var sloBurnWindows = []time.Duration{time.Hour, 6 * time.Hour, 3 * 24 * time.Hour}

// maxSLOsShown bounds the objectives computed per request (a classes file
// holds at most 16 per class, and the classes are the operator's).
const maxSLOsShown = 256

// SLOResponse is /api/slo's answer. Times are ns.
type SLOResponse struct {
	// AsOf ends every window: the range's end, else the newest record's
	// start (+1 ns), as "last 15m" is counted; 0 when the store is empty.
	AsOf int64       `json:"as_of"`
	SLOs []SLOStatus `json:"slos"`
	// Truncated: more objectives than maxSLOsShown; the first are shown.
	Truncated bool `json:"truncated,omitempty"`
	// MissingShards: shards that were down, whose records are not counted
	// (see partial.go).
	MissingShards []int `json:"missing_shards,omitempty"`
}

// SLOStatus is one objective of one class and how it fares.
type SLOStatus struct {
	Class  string  `json:"class"`
	Kind   string  `json:"kind"` // pageview or transaction
	ID     string  `json:"id"`   // pageview.SLO.ID, as /metrics labels it
	Text   string  `json:"text"` // "95% of pageviews under 2s over 30d"
	Target float64 `json:"target"`
	Under  int64   `json:"under_ns"`
	// Edge is the rollup grid edge the records are counted at: those
	// below it are good (at most 1.5% under Under, as in /metrics).
	Edge int64 `json:"edge_ns"`
	// Attainment is over the objective's window; Burn over sloBurnWindows.
	Attainment SLOWindow   `json:"attainment"`
	Burn       []SLOWindow `json:"burn"`
}

// SLOWindow counts one window [From, To). Ratios are null without records.
type SLOWindow struct {
	Label  string `json:"label"` // "1h", "30d"
	Window int64  `json:"window_ns"`
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Good   int64  `json:"good"`
	Total  int64  `json:"total"`
	// Attained is Good/Total; BurnRate the error ratio over the error
	// budget, (1 - Attained) / (1 - Target): 1 spends the budget exactly
	// over the objective's window. BudgetLeft is 1 - BurnRate (the share
	// of the window's budget not spent), on the objective's window only.
	Attained   *float64 `json:"attained"`
	BurnRate   *float64 `json:"burn_rate"`
	BudgetLeft *float64 `json:"budget_left,omitempty"`
}

// apiSLO answers /api/slo for the range parameters of the overview.
func (s *Server) apiSLO(c *gin.Context) {
	ctx, partial, ext, r, ok := s.partialRange(c)
	if !ok {
		return
	}
	resp := &SLOResponse{AsOf: ext.To, SLOs: []SLOStatus{}}
	if r.To != 0 {
		resp.AsOf = r.To
	}
	slos := s.cfg.SLOs
	if len(slos) > maxSLOsShown {
		slos, resp.Truncated = slos[:maxSLOsShown], true
	}
	var err error
	if resp.SLOs, err = computeSLOs(ctx, s.cfg.Store, slos, resp.AsOf); err != nil {
		fail(c, err)
		return
	}
	resp.MissingShards = missingShards(partial)
	c.JSON(http.StatusOK, resp)
}

// sloKey is one Summary: a kind over one window ending at AsOf.
type sloKey struct {
	kind   query.Kind
	window time.Duration
}

// computeSLOs counts every objective's good and total records over its
// window and the burn windows, all ending at end, from the rollups: one
// Summary per kind and window, its histogram cut at every objective's edge.
func computeSLOs(ctx context.Context, st query.Querier, slos []pageview.ClassSLO, end int64) ([]SLOStatus, error) {
	edges := map[query.Kind][]int64{}
	needs := map[sloKey]bool{}
	for _, s := range slos {
		k := query.Kind(SLOKind(s.SLO))
		edges[k] = append(edges[k], sloEdge(s.Under))
		needs[sloKey{k, s.Window}] = true
		for _, w := range sloBurnWindows {
			needs[sloKey{k, w}] = true
		}
	}
	for k, e := range edges {
		slices.Sort(e)
		// The first edge bounds nothing (bucket 0 is open below), so the
		// grid's first goes first and every objective's edge cuts.
		edges[k] = append([]int64{query.RollupEdges[0]}, slices.Compact(e)...)
	}
	hists := map[sloKey][]query.ClassHistogram{}
	if end > 0 {
		var mu sync.Mutex
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(4)
		for key := range needs {
			g.Go(func() error {
				sum, err := st.Summary(gctx, query.SummaryQuery{Kind: key.kind, Edges: edges[key.kind],
					Range: query.TimeRange{From: end - int64(key.window), To: end}})
				if err != nil {
					return fmt.Errorf("slo %s over %v: %w", key.kind, key.window, err)
				}
				mu.Lock()
				defer mu.Unlock()
				hists[key] = sum.Histograms
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	out := make([]SLOStatus, 0, len(slos))
	for _, s := range slos {
		k := query.Kind(SLOKind(s.SLO))
		status := SLOStatus{Class: s.Class, Kind: s.Kind, ID: s.ID(), Text: s.String(), Target: s.Target,
			Under: int64(s.Under), Edge: sloEdge(s.Under)}
		status.Attainment = sloWindow(hists[sloKey{k, s.Window}], s, s.Window, end)
		if status.Attainment.BurnRate != nil {
			left := 1 - *status.Attainment.BurnRate
			status.Attainment.BudgetLeft = &left
		}
		for _, w := range sloBurnWindows {
			status.Burn = append(status.Burn, sloWindow(hists[sloKey{k, w}], s, w, end))
		}
		out = append(out, status)
	}
	return out, nil
}

// sloWindow reads one class's counts at the objective's edge.
func sloWindow(hs []query.ClassHistogram, s pageview.ClassSLO, w time.Duration, end int64) SLOWindow {
	out := SLOWindow{Label: pageview.FormatSLODuration(w), Window: int64(w), From: end - int64(w), To: end}
	edge := sloEdge(s.Under)
	for _, h := range hs {
		if h.Class != s.Class {
			continue
		}
		for i, n := range h.Counts {
			out.Total += n
			if i+1 < len(h.Edges) && h.Edges[i+1] <= edge {
				out.Good += n
			}
		}
	}
	if out.Total > 0 {
		att := float64(out.Good) / float64(out.Total)
		burn := (1 - att) / (1 - s.Target)
		out.Attained, out.BurnRate = &att, &burn
	}
	return out
}

var (
	descSLOAttainment = prometheus.NewDesc("rtmon_slo_attainment_ratio",
		"Share of the class's records of this kind under the objective's threshold over its window, ending at the newest record (absent without records), counted from the store's rollups.", sloLabels, nil)
	descSLOBudget = prometheus.NewDesc("rtmon_slo_error_budget_remaining_ratio",
		"Share of the objective's error budget not spent over its window: 1 - (1 - attainment) / (1 - objective); negative when overspent.", sloLabels, nil)
	descSLOBurn = prometheus.NewDesc("rtmon_slo_burn_rate",
		"Error ratio over the error budget in the window (1h, 6h, 3d) ending at the newest record: 1 spends the budget exactly over the objective's window.",
		append(slices.Clone(sloLabels), "window"), nil)
)

// sloMetrics are the objectives' attainment, budget left and burn rates as
// the overview shows them, for Prometheus: what `rtmon rules` computes from
// the histograms, read straight from the store (which keeps the whole
// window, while a Prometheus may have scraped only part of it).
func sloMetrics(ctx context.Context, st query.Querier, slos []pageview.ClassSLO) ([]prometheus.Metric, error) {
	if len(slos) == 0 {
		return nil, nil
	}
	if len(slos) > maxSLOsShown {
		slos = slos[:maxSLOsShown]
	}
	ext, err := dataExtent(ctx, st)
	if err != nil {
		return nil, err
	}
	statuses, err := computeSLOs(ctx, st, slos, ext.To)
	if err != nil {
		return nil, err
	}
	var out []prometheus.Metric
	for i, s := range statuses { // one per objective, in order
		labels := []string{s.Class, SLOKind(slos[i].SLO), s.ID}
		if a := s.Attainment; a.Attained != nil {
			out = append(out, prometheus.MustNewConstMetric(descSLOAttainment, gauge, *a.Attained, labels...),
				prometheus.MustNewConstMetric(descSLOBudget, gauge, *a.BudgetLeft, labels...))
		}
		for _, b := range s.Burn {
			if b.BurnRate != nil {
				out = append(out, prometheus.MustNewConstMetric(descSLOBurn, gauge, *b.BurnRate, append(labels, b.Label)...))
			}
		}
	}
	return out, nil
}
