package web

// The what-if page: the user picks or edits RLM rules and sees, per class,
// the response-time distribution the whatif package predicts overlaid on the
// measured one, with the ranking of single actions and pairs and every
// model's assumptions. Like the rest of the UI it only reads: rules travel
// in the query string (GET), so a what-if view is a shareable link.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/sync/singleflight"

	"github.com/rtmon/rtmon/store/query"
	"github.com/rtmon/rtmon/whatif"
)

// DefaultWhatIfRules prefill the page when the link names no rules: the
// first standard candidate, the cheapest cure for the 3 s SYN peak.
const DefaultWhatIfRules = "IF IP.SRC == * THEN FAST SYN GAP 200ms"

// WhatIfOptions tune the what-if page (Config.WhatIf). Zero values take
// the defaults noted.
type WhatIfOptions struct {
	// Priorities are used when the link has no priority= parameter, e.g.
	// from the classes file the capture was analyzed with. Unlisted classes
	// are low priority (whatif.Options).
	Priorities map[string]whatif.Priority
	// Read bounds the records read for one time range (whatif.ReadLimits):
	// past MaxTransactions the newest are kept and the page says so.
	Read whatif.ReadLimits
	// CacheTTL is how long the records of one time range are reused while
	// the store takes new records, so editing rules does not re-read it
	// (default 2 min; < 0: never). While the store writes nothing (a stored
	// capture under rtmon serve) they are reused until evicted by other
	// ranges.
	CacheTTL time.Duration
	// Logger; default Config.Logger.
	Logger *slog.Logger
}

// whatIfRoutes serves the what-if page at /whatif (and /whatif/) and its
// JSON API at /whatif/api when Config.WhatIf is set; otherwise /whatif
// says the analysis is not available.
func (s *Server) whatIfRoutes(r gin.IRoutes) {
	if s.cfg.WhatIf == nil {
		off := func(c *gin.Context) {
			s.errorPage(c, http.StatusNotFound, "What-if", "The what-if analysis is not available in this build yet.")
		}
		r.GET("/whatif", off)
		r.GET("/whatif/*rest", off)
		return
	}
	o := *s.cfg.WhatIf
	if o.CacheTTL == 0 {
		o.CacheTTL = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = s.cfg.Logger
	}
	h := &whatIfHandler{st: s.cfg.Store, o: o, items: map[string]*whatIfData{}}
	page := func(c *gin.Context) { s.render(c, http.StatusOK, pageData{Page: "whatif", Heading: "What-if"}) }
	r.GET("/whatif", page)
	r.GET("/whatif/", page)
	r.GET("/whatif/api", h.api)
	r.GET("/whatif/rules.txt", h.rulesFile)
}

type whatIfHandler struct {
	st    query.Querier
	o     WhatIfOptions
	group singleflight.Group
	mu    sync.Mutex
	items map[string]*whatIfData
}

// WhatIfResponse is /whatif/api's answer. Durations and times are ns.
type WhatIfResponse struct {
	// RulesText is the rule source evaluated (the default when the link
	// has none).
	RulesText string `json:"rules_text"`
	// ParseError is set when RulesText does not parse; nothing is
	// evaluated then (Error holds the same as one line).
	ParseError *WhatIfParseError `json:"parse_error,omitempty"`
	Error      string            `json:"error,omitempty"`
	Rules      []string          `json:"rules"`
	Unit       string            `json:"unit"` // whatif.Dataset.UnitName
	Units      int               `json:"units"`
	Range      query.TimeRange   `json:"range"` // records read: [From, To)
	Loaded     whatif.Loaded     `json:"loaded"`
	// Notes say what limits the answer (truncation, missing connections).
	Notes []string `json:"notes"`
	// MissingShards: cluster shards down while the records were read;
	// the replay holds the other shards' clients only (also in Notes).
	MissingShards []int                      `json:"missing_shards,omitempty"`
	Priorities    map[string]whatif.Priority `json:"priorities"`
	// Classes: measured and predicted distributions per class (edges are
	// the overview histogram's).
	Classes []whatif.ClassResult `json:"classes"`
	// Class is the class Ranking is for.
	Class       string             `json:"class"`
	Ranking     []whatif.Ranked    `json:"ranking"`
	Candidates  []WhatIfCandidate  `json:"candidates"`
	Assumptions []WhatIfAssumption `json:"assumptions"`
	LoadModel   whatif.LoadModel   `json:"load_model"`
	// SYNSchedules: how DROP SYN times each class's retransmissions.
	SYNSchedules []whatif.SYNScheduleSummary `json:"syn_schedules"`
	Passes       int                         `json:"passes"`
	// Members: the replays pooled into the predictions (whatif.Result).
	Members int `json:"members"`
	// ServerModel made the predictions (the model= parameter: linear or
	// queue); Queue is the fitted queueing server when it is queue.
	ServerModel whatif.ServerModel `json:"server_model"`
	Queue       *whatif.QueueModel `json:"queue,omitempty"`
	// Window and ReportDelay (ns): the RT conditions' sliding window, and
	// how long after a unit ended they saw it (rtmon live's report delay).
	Window      int64 `json:"window_ns"`
	ReportDelay int64 `json:"report_delay_ns"`
}

// WhatIfParseError locates a rule syntax error (1-based; 0 when the error
// is not tied to a position, e.g. too many rules).
type WhatIfParseError struct {
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Message string `json:"message"`
}

// WhatIfCandidate is one standard candidate for the page's picker.
type WhatIfCandidate struct {
	Label string `json:"label"`
	Rules string `json:"rules"`
}

// WhatIfAssumption is one action's model assumptions (Action.Assumptions).
type WhatIfAssumption struct {
	Action string `json:"action"`
	Text   string `json:"text"`
}

// newWhatIfResponse has every list empty rather than null, for the page.
func newWhatIfResponse() *WhatIfResponse {
	return &WhatIfResponse{Notes: []string{}, Rules: []string{}, Classes: []whatif.ClassResult{},
		Ranking: []whatif.Ranked{}, Candidates: []WhatIfCandidate{}, Assumptions: []WhatIfAssumption{},
		RulesText: DefaultWhatIfRules}
}

// badRequest marks errors in the link's parameters (400, not 500).
type badRequest struct{ error }

func (e badRequest) Unwrap() error { return e.error }

// parsePriorities reads "premium=high,others=low" as the CLI's --priority.
func parsePriorities(s string) (map[string]whatif.Priority, error) {
	out := map[string]whatif.Priority{}
	for _, p := range strings.Split(s, ",") {
		if strings.TrimSpace(p) == "" {
			continue
		}
		name, prio, err := whatif.ParsePriority(strings.TrimSpace(p))
		if err != nil {
			return nil, err
		}
		out[name] = prio
	}
	return out, nil
}

// api answers /whatif/api: the link's rules evaluated over its range, the
// ranking of the standard candidates and the user's rules for one class,
// and the assumptions of every action shown.
func (h *whatIfHandler) api(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	resp, err := h.answer(c)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.As(err, new(badRequest)) {
			status = http.StatusBadRequest
		}
		c.AbortWithStatusJSON(status, gin.H{"error": err.Error()})
		return
	}
	// encoding/json escapes <, > and &, so the answer is inert even if a
	// browser were tricked into rendering it as HTML.
	c.JSON(http.StatusOK, resp)
}

func (h *whatIfHandler) answer(c *gin.Context) (*WhatIfResponse, error) {
	resp := newWhatIfResponse()
	if rules, ok := c.GetQuery("rules"); ok {
		// Present but empty evaluates no rules: predicted equals measured.
		resp.RulesText = rules
	}
	resp.Priorities = maps.Clone(h.o.Priorities)
	if prios, ok := c.GetQuery("priority"); ok {
		p, err := parsePriorities(prios)
		if err != nil {
			return nil, badRequest{err}
		}
		resp.Priorities = p
	}
	if resp.Priorities == nil {
		resp.Priorities = map[string]whatif.Priority{}
	}
	opts := whatif.Options{Priorities: resp.Priorities, Edges: histEdges}
	switch m := whatif.ServerModel(c.Query("model")); m {
	case "", whatif.ServerLinear, whatif.ServerQueue:
		opts.ServerModel = m
	default:
		return nil, badRequest{fmt.Errorf("model %q: want linear or queue", m)}
	}
	rules, perr := whatif.ParseRules(resp.RulesText)
	sensor, err := sensorParam(c)
	if err != nil {
		return nil, err
	}
	data, err := h.data(c.Request.Context(), rangeFrom(c), sensor)
	if err != nil {
		return nil, err
	}
	resp.Range, resp.Loaded, resp.Notes = data.rng, data.loaded, append([]string{}, data.notes...)
	// The front end acts on rtmon's live measurement, which reports a
	// pageview only when its idle gap has passed (8 s after its end).
	opts.ReportDelay = data.ds.LiveReportDelay()
	resp.MissingShards = data.missing
	resp.Units, resp.Unit = data.ds.Units(), data.ds.UnitName()
	resp.SYNSchedules = data.ds.SYNSchedules(opts)
	singles, err := data.ds.StandardCandidates(opts)
	if err != nil {
		return nil, err
	}
	for _, rs := range singles {
		resp.Candidates = append(resp.Candidates, WhatIfCandidate{Label: candidateLabel(rs), Rules: rulesText(rs)})
	}
	if perr != nil {
		// A typo is the user's to fix, not a failed request: 200, with the
		// position so the page can point at it.
		resp.setParseError(perr)
		return resp, nil
	}
	if err := resp.evaluate(data.ds, rules, c.Query("class"), opts); err != nil {
		return nil, err
	}
	// The user's rules join the standard candidates as singles, so the
	// ranking says how they compare and combine.
	singles = withRules(singles, rules)
	if err := resp.rank(data, singles, opts); err != nil {
		return nil, err
	}
	assume := whatif.Assumptions(append([][]whatif.Rule{rules}, singles...)...)
	for _, k := range slices.Sorted(maps.Keys(assume)) {
		resp.Assumptions = append(resp.Assumptions, WhatIfAssumption{Action: k, Text: assume[k]})
	}
	return resp, nil
}

func (resp *WhatIfResponse) setParseError(perr error) {
	pe := &WhatIfParseError{Message: perr.Error()}
	var p *whatif.ParseError
	if errors.As(perr, &p) {
		pe.Line, pe.Col = p.Line, p.Col
		pe.Message = fmt.Sprintf("expected %s, found %s", p.Expected, p.Found)
	}
	resp.ParseError, resp.Error = pe, perr.Error()
}

// evaluate replays the rules and picks the class the ranking is for: the
// link's, else defaultRankClass.
func (resp *WhatIfResponse) evaluate(ds *whatif.Dataset, rules []whatif.Rule, class string, opts whatif.Options) error {
	res, err := ds.Evaluate(rules, opts)
	if err != nil {
		return badRequest{fmt.Errorf("evaluate: %w", err)}
	}
	resp.Rules = nonNil(res.Rules)
	resp.Classes, resp.LoadModel, resp.Passes, resp.Members = res.Classes, res.LoadModel, res.Passes, res.Members
	resp.ServerModel, resp.Queue = res.ServerModel, res.Queue
	resp.Window, resp.ReportDelay = int64(res.Window), int64(res.ReportDelay)
	resp.Class = class
	if resp.Class != "" && !slices.Contains(ds.Classes(), resp.Class) {
		return badRequest{fmt.Errorf("class %q has no records in this range", resp.Class)}
	}
	if resp.Class == "" {
		resp.Class = defaultRankClass(ds.Classes(), resp.Priorities)
	}
	return nil
}

// withRules adds each rule as a single not among singles already.
func withRules(singles [][]whatif.Rule, rules []whatif.Rule) [][]whatif.Rule {
	seen := map[string]bool{}
	for _, rs := range singles {
		seen[rulesText(rs)] = true
	}
	for _, r := range rules {
		if rs := []whatif.Rule{r}; !seen[rulesText(rs)] {
			seen[rulesText(rs)] = true
			singles = append(singles, rs)
		}
	}
	return singles
}

// rank fills the ranking for resp.Class.
func (resp *WhatIfResponse) rank(data *whatIfData, singles [][]whatif.Rule, opts whatif.Options) error {
	ranking, err := data.rank(singles, opts)
	if err != nil {
		return err
	}
	for _, rk := range ranking {
		if rk.Class == resp.Class {
			resp.Ranking = append(resp.Ranking, rk)
		}
	}
	if len(singles) > maxPairSingles {
		resp.Notes = append(resp.Notes, fmt.Sprintf("%d single rule sets: pairs are not ranked above %d.", len(singles), maxPairSingles))
	}
	return nil
}

// defaultRankClass is the first high-priority class (the one the RLM
// actions are meant to help), else the first class.
func defaultRankClass(classes []string, prios map[string]whatif.Priority) string {
	for _, c := range classes {
		if prios[c] == whatif.High {
			return c
		}
	}
	if len(classes) > 0 {
		return classes[0]
	}
	return ""
}

func rulesText(rs []whatif.Rule) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, "\n")
}

// candidateLabel names a standard candidate by its actions, plus the class
// for the per-class DROP SYN rules.
func candidateLabel(rs []whatif.Rule) string {
	var parts []string
	for _, r := range rs {
		var acts []string
		for _, a := range r.Actions {
			acts = append(acts, a.String())
		}
		l := strings.Join(acts, ", ")
		if s := r.String(); strings.Contains(s, "CLASS") {
			if i := strings.Index(s, " THEN "); i > 0 {
				l += " (" + strings.TrimPrefix(s[:i], "IF ") + ")"
			}
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, "; ")
}

// maxPairSingles bounds the pairwise ranking: n singles make n(n-1)/2 pairs,
// each a full replay.
const maxPairSingles = 10

// whatIfData is one time range's records, ready to replay, with the
// rankings computed over it (ranking is the slow part; rules edits that
// leave the candidate set alone reuse it).
type whatIfData struct {
	at      time.Time
	written int64 // store's Stats().Written when read
	ds      *whatif.Dataset
	rng     query.TimeRange
	loaded  whatif.Loaded
	notes   []string
	// missing: cluster shards that were down when read (partial.go).
	missing []int

	group singleflight.Group
	mu    sync.Mutex
	ranks map[string][]whatif.Ranked
}

func (h *whatIfHandler) data(ctx context.Context, rng rangeParams, sensor string) (*whatIfData, error) {
	key := rng.Last + "\x00" + rng.From + "\x00" + rng.To + "\x00" + sensor
	if h.o.CacheTTL > 0 {
		st := h.st.Stats()
		written, down := st.Written, len(st.ShardsDown) > 0
		h.mu.Lock()
		// A partial read is kept only while shards are still down.
		if d, ok := h.items[key]; ok && (time.Since(d.at) < h.o.CacheTTL || d.written == written) && (len(d.missing) == 0 || down) {
			h.mu.Unlock()
			return d, nil
		}
		h.mu.Unlock()
	}
	v, err, _ := h.group.Do(key, func() (any, error) {
		// Detached from the first caller: others may be waiting on it.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		defer cancel()
		start := time.Now()
		d, err := h.load(cctx, rng, sensor)
		if err != nil {
			return nil, err
		}
		h.o.Logger.Debug("whatif: records loaded", "transactions", d.loaded.Transactions, "pageviews", d.loaded.Pageviews,
			"connections", d.loaded.Connections, "took", time.Since(start))
		h.mu.Lock()
		defer h.mu.Unlock()
		// A dataset of 200k transactions is tens of MB: keep a few ranges.
		for len(h.items) >= 4 {
			oldest := ""
			for k, e := range h.items {
				if oldest == "" || e.at.Before(h.items[oldest].at) {
					oldest = k
				}
			}
			delete(h.items, oldest)
		}
		h.items[key] = d
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*whatIfData), nil
}

func (h *whatIfHandler) load(ctx context.Context, rp rangeParams, sensor string) (*whatIfData, error) {
	// With a cluster shard down, replay the other shards' clients and
	// say so: a shard holds whole clients (their pageviews and
	// connections), so what is read replays as it would have.
	ctx, partial := partialContext(ctx, h.st)
	var ext extent
	if rp.Last != "" && rp.Last != "all" {
		var err error
		if ext, err = dataExtent(ctx, h.st); err != nil {
			return nil, err
		}
	}
	rng, err := rp.resolve(ext)
	if err != nil {
		return nil, badRequest{err}
	}
	d := &whatIfData{at: time.Now(), written: h.st.Stats().Written, ranks: map[string][]whatif.Ranked{}}
	lim := h.o.Read
	lim.Sensor = sensor // one front end's traffic: its splicer acts on nothing else
	recs, err := whatif.ReadStore(ctx, h.st, rng, lim)
	if err != nil {
		return nil, err
	}
	if d.ds, err = recs.Dataset(); err != nil {
		return nil, err
	}
	d.rng, d.loaded, d.notes = recs.Range, recs.Loaded, recs.Notes()
	if d.missing = missingShards(partial); len(d.missing) > 0 {
		d.notes = append(d.notes, partialText(d.missing))
	}
	return d, nil
}

// rank ranks singles (and their pairs, up to maxPairSingles singles) once
// per candidate set and options, sharing the replays between requests.
func (d *whatIfData) rank(singles [][]whatif.Rule, opts whatif.Options) ([]whatif.Ranked, error) {
	var key strings.Builder
	key.WriteString(string(opts.ServerModel) + ";") // a queue ranking is not a linear one
	for _, c := range slices.Sorted(maps.Keys(opts.Priorities)) {
		fmt.Fprintf(&key, "%s=%s,", c, opts.Priorities[c])
	}
	for _, rs := range singles {
		key.WriteString("\x00" + rulesText(rs))
	}
	d.mu.Lock()
	if r, ok := d.ranks[key.String()]; ok {
		d.mu.Unlock()
		return r, nil
	}
	d.mu.Unlock()
	v, err, _ := d.group.Do(key.String(), func() (any, error) {
		cands := singles
		if len(singles) <= maxPairSingles {
			cands = whatif.Pairs(singles)
		}
		r, err := d.ds.Rank(cands, opts)
		if err != nil {
			return nil, fmt.Errorf("whatif ranking: %w", err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.ranks) > 32 {
			clear(d.ranks)
		}
		d.ranks[key.String()] = r
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	return v.([]whatif.Ranked), nil
}
