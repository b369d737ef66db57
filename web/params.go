package web

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/store/query"
	"golang.org/x/sync/errgroup"
)

// extent is the time span of stored transactions.
type extent struct {
	From int64 `json:"from"` // oldest start
	To   int64 `json:"to"`   // newest start + 1
	N    int64 `json:"n"`
}

// dataExtent is the span of the stored records: "last 15m" is relative to
// the newest transaction; the oldest transaction or pageview sets where
// the charts' time axis starts.
func dataExtent(ctx context.Context, st query.Querier) (extent, error) {
	var tx, pv query.Extent
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { tx, err = st.Extent(gctx, query.Transactions); return err })
	g.Go(func() (err error) { pv, err = st.Extent(gctx, query.Pageviews); return err })
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

// ParseTime reads the times the UI's URLs and the CLI take: RFC 3339, a
// date-time without zone (UTC), a date, or ns since the epoch; "" is 0.
func ParseTime(s string) (int64, error) {
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
	return 0, fmt.Errorf("time %q: want RFC 3339, YYYY-MM-DDTHH:MM[:SS], YYYY-MM-DD or ns since the epoch", s)
}

// resolve turns the parameters into a store range; ext is needed for
// "last" and for bounding "all" (charts need a finite span).
func (p rangeParams) resolve(ext extent) (query.TimeRange, error) {
	var r query.TimeRange
	if p.Last != "" && p.Last != "all" {
		d, err := parseLast(p.Last)
		if err != nil || d <= 0 {
			return r, fmt.Errorf("last=%q: want a duration such as 15m or all", p.Last)
		}
		// Open above: records newer than the newest transaction (a
		// connection that never carried one) belong to "the last 15 min" too.
		return query.TimeRange{From: ext.To - int64(d)}, nil
	}
	var err error
	if r.From, err = ParseTime(p.From); err != nil {
		return r, err
	}
	if r.To, err = ParseTime(p.To); err != nil {
		return r, err
	}
	if r.To != 0 && r.To <= r.From {
		return r, errors.New("the time range ends before it starts")
	}
	return r, nil
}

// maxLastDays bounds last=Nd (a century): past it the duration overflows.
const maxLastDays = 36500

// parseLast reads a Go duration, or whole days as "7d" (Go has no d unit).
func parseLast(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > maxLastDays {
			return 0, fmt.Errorf("days %q: want 0 to %d", s, maxLastDays)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

// span is the effective [from, to) for charts: open ends clamp to the data.
func span(r query.TimeRange, ext extent) (int64, int64) {
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

func kindParam(c *gin.Context) (query.Kind, error) {
	switch k := c.Query("kind"); k {
	case "", "transactions":
		return query.Transactions, nil
	case "pageviews":
		return query.Pageviews, nil
	default:
		return "", fmt.Errorf("kind=%q: want transactions or pageviews", k)
	}
}
