package web

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
)

func bad(c *gin.Context, err error) {
	c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": err.Error()})
}

// pageviewByID reads pageview id; if it cannot, it answers 404 (no such
// pageview) or 500 and returns false.
func (s *Server) pageviewByID(c *gin.Context, id string) (*query.PageviewDetail, bool) {
	det, err := s.cfg.Store.PageviewByID(c.Request.Context(), id)
	if errors.Is(err, query.ErrNotFound) {
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
	Components map[query.Kind][]string `json:"components"`
}

func (s *Server) apiMeta(c *gin.Context) {
	// The class picker: the classes the reachable shards hold will do.
	ctx, _ := partialContext(c.Request.Context(), s.cfg.Store)
	classes, err := s.cfg.Store.Classes(ctx, query.TimeRange{})
	if err != nil {
		fail(c, fmt.Errorf("classes: %w", err))
		return
	}
	c.JSON(http.StatusOK, metaResponse{Title: s.cfg.Title, Classes: nonNil(classes), Live: s.cfg.Live != nil,
		Components: map[query.Kind][]string{query.Transactions: query.Components(query.Transactions), query.Pageviews: query.Components(query.Pageviews)}})
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// searchParams parses the search filters; minimum response time is in ms
// in the URL (what people type), ns in the store.
func searchParams(c *gin.Context, ext func() (extent, error)) (query.SearchQuery, error) {
	var q query.SearchQuery
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
	if q.ID = c.Query("id"); len(q.ID) > maxIDLen {
		return q, fmt.Errorf("id: longer than %d bytes", maxIDLen)
	}
	if q.Sensor, err = sensorParam(c); err != nil {
		return q, err
	}
	if v := c.Query("status"); v != "" {
		if q.Status, err = strconv.Atoi(v); err != nil || q.Status < 100 || q.Status > 999 {
			return q, fmt.Errorf("status=%q: want an HTTP status code", v)
		}
	}
	if err = componentParams(c, &q); err != nil {
		return q, err
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
		if err != nil || page < 1 || page > maxSearchOffset/q.Limit+1 {
			return q, fmt.Errorf("page=%q: want 1, 2, ... up to result %d", v, maxSearchOffset)
		}
		q.Offset = (page - 1) * q.Limit
	}
	return q, nil
}

// SearchResponse is one page of search results.
type SearchResponse struct {
	Kind         query.Kind                 `json:"kind"`
	Total        int64                      `json:"total"`
	Offset       int                        `json:"offset"`
	Limit        int                        `json:"limit"`
	Transactions []*reconstruct.Transaction `json:"transactions,omitempty"`
	Pageviews    []*pageview.Pageview       `json:"pageviews,omitempty"`
	// Links[i] leads from Transactions[i] to its pageview; built here
	// because a start time in ns is not exact as a JavaScript number.
	Links []string `json:"links,omitempty"`
	// MissingShards: shards that were down, whose records are not among
	// the matches (see partial.go).
	MissingShards []int `json:"missing_shards,omitempty"`
}

func (s *Server) apiSearch(c *gin.Context) {
	ctx := c.Request.Context()
	q, err := searchParams(c, func() (extent, error) { return dataExtent(ctx, s.cfg.Store) })
	if err != nil {
		bad(c, err)
		return
	}
	pctx, partial := partialContext(ctx, s.cfg.Store)
	res, err := s.cfg.Store.Search(pctx, q)
	if err != nil {
		bad(c, fmt.Errorf("search: %w", err))
		return
	}
	out := SearchResponse{Kind: q.Kind, Total: res.Total, Offset: q.Offset, Limit: q.Limit, Transactions: res.Transactions, Pageviews: res.Pageviews,
		MissingShards: missingShards(partial)}
	for _, t := range res.Transactions {
		out.Links = append(out.Links, txPageviewLink(t))
	}
	if q.Kind == query.Transactions {
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
	*query.PageviewDetail
	T0       int64               `json:"t0"`
	Pageview [2]int64            `json:"pv_offsets"` // pageview start, end - T0
	Offsets  map[string][2]int64 `json:"offsets"`    // transaction id -> start, end - T0
	Search   map[string]string   `json:"search"`     // transaction id -> its link in search
}

func pageviewResponse(det *query.PageviewDetail) PageviewResponse {
	t0 := det.Pageview.Start
	for _, t := range det.Transactions {
		t0 = min(t0, t.Start)
	}
	r := PageviewResponse{PageviewDetail: det, T0: t0, Pageview: [2]int64{det.Pageview.Start - t0, det.Pageview.End - t0},
		Offsets: make(map[string][2]int64, len(det.Transactions)), Search: txSearchLinks(det.Transactions)}
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
	res, err := s.cfg.Store.Search(c.Request.Context(), query.SearchQuery{Kind: query.Pageviews, Client: client.String(),
		Range: query.TimeRange{From: start - int64(time.Hour), To: start + 1}, Limit: 200})
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
// Search bounds: the largest min= (one day, in ms) and the deepest result
// a page may start at.
const (
	maxMinMillis    = 86_400_000.0
	maxSearchOffset = 10_000_000
)

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
	rc := http.NewResponseController(w)
	write := func(frame string) bool {
		// A reader that stops reading must not hold the stream forever.
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.LiveWriteTimeout))
		if _, err := io.WriteString(w, frame); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(js []byte) bool { return write("event: live\ndata: " + string(js) + "\n\n") }
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
			if !write(": keep-alive\n\n") {
				return
			}
		}
	}
}
