package web

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
)

// maxIDLen bounds id= (record ids are short hashes; anything longer is
// not one).
const maxIDLen = 128

// componentParams reads the duration filter of a search: comp= (default
// total) between min= and max= milliseconds, max exclusive, as a bucket
// of the overview's histogram is. Milliseconds are what people type; the
// charts' bucket edges are whole ns written as ms with up to six decimals,
// so the value is rounded, not truncated, to get the same ns back.
func componentParams(c *gin.Context, q *query.SearchQuery) error {
	q.Component = strings.TrimSpace(c.DefaultQuery("comp", "total"))
	if q.Component == "" {
		q.Component = "total"
	}
	if !slices.Contains(query.Components(q.Kind), q.Component) {
		return fmt.Errorf("comp=%q: want one of %s", q.Component, strings.Join(query.Components(q.Kind), ", "))
	}
	var err error
	if q.ComponentMin, err = millisParam(c, "min"); err != nil {
		return err
	}
	if q.ComponentMax, err = millisParam(c, "max"); err != nil {
		return err
	}
	if q.ComponentMax != 0 && q.ComponentMax <= q.ComponentMin {
		return fmt.Errorf("max=%s: want more than min=%s", c.Query("max"), c.Query("min"))
	}
	return nil
}

// millisParam is parameter k in ms as ns; 0 when absent.
func millisParam(c *gin.Context, k string) (int64, error) {
	v := c.Query(k)
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseFloat(v, 64)
	if err != nil || !(ms >= 0 && ms <= maxMinMillis) {
		return 0, fmt.Errorf("%s=%q: want milliseconds, 0 to %d", k, v, int64(maxMinMillis))
	}
	return int64(math.Round(ms * 1e6)), nil
}

// txSearchLinks leads from each object of a pageview to its transaction in
// search: its id, within the exact nanosecond it started (so the range
// bounds the read). Built here because ns since the epoch are not exact
// as JavaScript numbers.
func txSearchLinks(txs []*reconstruct.Transaction) map[string]string {
	out := make(map[string]string, len(txs))
	for _, t := range txs {
		at := func(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }
		out[t.ID] = "/search?" + url.Values{"id": {t.ID}, "from": {at(t.Start)}, "to": {at(t.Start + 1)}}.Encode()
	}
	return out
}
