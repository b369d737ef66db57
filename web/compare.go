package web

// The compare page (issue #17, "did the 14:05 deploy make premium
// slower?"): two sides, A and B, side by side per class, with the
// differences and whether they are more than noise (package compare). The
// sides travel in the query string, so a comparison is a shareable link
// and the report export can carry it.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/compare"
	"github.com/rtmon/rtmon/store/query"
)

// compareKeys are the query parameters of a comparison: a_from, a_to,
// b_from, b_to (as from/to elsewhere), or at with window (the window
// before at against the window after it, default 30m); class keeps one
// class; a_class with b_class compare two classes, a_sensor/b_sensor
// restrict a side to one sensor.
var compareKeys = []string{"a_from", "a_to", "b_from", "b_to", "at", "window", "class", "a_class", "b_class", "a_sensor", "b_sensor"}

// hasCompare tells whether the URL asks for a comparison (the report adds
// one only then).
func hasCompare(c *gin.Context) bool {
	for _, k := range []string{"a_from", "a_to", "b_from", "b_to", "at", "a_class"} {
		if c.Query(k) != "" {
			return true
		}
	}
	return false
}

// compareWindowMax bounds window= (a year): past it the sides overflow.
const compareWindowMax = 366 * 24 * time.Hour

// compareRequest reads a comparison from the URL. Without ranges (and
// sides alike but for them) the stored span is split in two halves, so
// the page opens on something.
func compareRequest(c *gin.Context, ext func() (extent, error)) (compare.Request, error) {
	req := compare.Request{Class: c.Query("class")}
	req.A.Class, req.B.Class = c.Query("a_class"), c.Query("b_class")
	req.A.Sensor, req.B.Sensor = c.Query("a_sensor"), c.Query("b_sensor")
	if (req.A.Class == "") != (req.B.Class == "") {
		return req, errors.New("a_class and b_class go together")
	}
	if at := c.Query("at"); at != "" {
		t, err := ParseTime(at)
		if err != nil {
			return req, fmt.Errorf("at: %w", err)
		}
		w := 30 * time.Minute
		if ws := c.Query("window"); ws != "" {
			if w, err = parseLast(ws); err != nil || w <= 0 || w > compareWindowMax {
				return req, fmt.Errorf("window=%q: want a duration such as 30m, at most 366d", ws)
			}
		}
		req.A.Range = query.TimeRange{From: t - int64(w), To: t}
		req.B.Range = query.TimeRange{From: t, To: t + int64(w)}
		return req, nil
	}
	for _, p := range []struct {
		key string
		dst *int64
	}{{"a_from", &req.A.Range.From}, {"a_to", &req.A.Range.To}, {"b_from", &req.B.Range.From}, {"b_to", &req.B.Range.To}} {
		v, err := ParseTime(c.Query(p.key))
		if err != nil {
			return req, fmt.Errorf("%s: %w", p.key, err)
		}
		*p.dst = v
	}
	for _, r := range []query.TimeRange{req.A.Range, req.B.Range} {
		if r.To != 0 && r.To <= r.From {
			return req, errors.New("a compared range ends before it starts")
		}
	}
	// (Two classes or two sensors compare over all the data instead.)
	if req.A.Range == (query.TimeRange{}) && req.B.Range == (query.TimeRange{}) && req.A.Class == "" && req.A.Sensor == req.B.Sensor {
		e, err := ext()
		if err != nil {
			return req, err
		}
		mid := e.From + (e.To-e.From)/2
		req.A.Range = query.TimeRange{From: e.From, To: mid}
		req.B.Range = query.TimeRange{From: mid, To: e.To}
	}
	return req, nil
}

// compareTimeout bounds one comparison: two passes over each side's
// records and the bootstrap.
const compareTimeout = 2 * time.Minute

func (s *Server) runCompare(ctx context.Context, req compare.Request) (*compare.Report, error) {
	ctx, cancel := context.WithTimeout(ctx, compareTimeout)
	defer cancel()
	return compare.Run(ctx, s.cfg.Store, req) // its errors say "compare:"
}

func (s *Server) comparePage(c *gin.Context) {
	s.render(c, http.StatusOK, pageData{Page: "compare", Heading: "Compare"})
}

// CompareResponse is /api/compare's answer: the comparison and, with a
// cluster shard down, the shards whose clients both sides lack (see
// partial.go; a side is compared on the same shards as the other).
type CompareResponse struct {
	*compare.Report
	MissingShards []int `json:"missing_shards,omitempty"`
}

func (s *Server) apiCompare(c *gin.Context) {
	ctx, partial := partialContext(c.Request.Context(), s.cfg.Store)
	req, err := compareRequest(c, func() (extent, error) { return dataExtent(ctx, s.cfg.Store) })
	if err != nil {
		bad(c, err)
		return
	}
	rep, err := s.runCompare(ctx, req)
	if err != nil {
		fail(c, err)
		return
	}
	if rep.Classes == nil {
		rep.Classes = []compare.ClassReport{}
	}
	c.JSON(http.StatusOK, CompareResponse{Report: rep, MissingShards: missingShards(partial)})
}

// reportCompare is the comparison a report URL asks for, or nil, with
// the shards it lacked.
func (s *Server) reportCompare(c *gin.Context) (*compare.Report, []int, error) {
	if !hasCompare(c) {
		return nil, nil, nil
	}
	ctx, partial := partialContext(c.Request.Context(), s.cfg.Store)
	req, err := compareRequest(c, func() (extent, error) { return dataExtent(ctx, s.cfg.Store) })
	if err != nil {
		return nil, nil, err
	}
	rep, err := s.runCompare(ctx, req)
	return rep, missingShards(partial), err
}

// compareRow is one report table row, formatted.
type compareRow struct {
	What                                      string
	NA, NB                                    int
	MedA, MedB, DMed, RelMed, MedCI           string
	P90A, P90B, D90, Rel90, P90CI, P99A, P99B string
	P, Verdict                                string
}

// compareClass is one class of the report's comparison table.
type compareClass struct {
	Class, Verdict string
	Rows           []compareRow
}

// reportCompareRows formats a comparison for the report template.
func reportCompareRows(rep *compare.Report) []compareClass {
	var out []compareClass
	ci := func(i compare.Interval) string { return "[" + fmtMS(int64(i.Lo)) + ", " + fmtMS(int64(i.Hi)) + "]" }
	rel := func(x float64) string { return fmt.Sprintf("%+.0f%%", 100*x) }
	for _, cr := range rep.Classes {
		cc := compareClass{Class: cr.Class, Verdict: cr.Verdict}
		for _, r := range cr.Rows {
			cc.Rows = append(cc.Rows, compareRow{What: string(r.Kind) + " " + r.Component, NA: r.A.N, NB: r.B.N,
				MedA: fmtMS(r.A.Median), MedB: fmtMS(r.B.Median), DMed: fmtMS(r.DeltaMedian), RelMed: rel(r.RelMedian), MedCI: ci(r.MedianCI),
				P90A: fmtMS(r.A.P90), P90B: fmtMS(r.B.P90), D90: fmtMS(r.DeltaP90), Rel90: rel(r.RelP90), P90CI: ci(r.P90CI),
				P99A: fmtMS(r.A.P99), P99B: fmtMS(r.B.P99), P: fmt.Sprintf("%.3g", r.PValue), Verdict: r.Verdict})
		}
		out = append(out, cc)
	}
	return out
}

// compareSideText describes a side for the report.
func compareSideText(sd compare.Side) string {
	t := func(ns int64, open string) string {
		if ns == 0 {
			return open
		}
		return tstamp(ns)
	}
	out := t(sd.Range.From, "start") + " – " + t(sd.Range.To, "end")
	if sd.Class != "" {
		out += ", class " + sd.Class
	}
	if sd.Sensor != "" {
		out += ", sensor " + sd.Sensor
	}
	return out
}
