package web

// The what-if page's "Download rules": one ranked rule set (or the rules
// evaluated) as a rules file a front end loads, its predicted effect,
// model and assumptions in comments (whatif.WriteRulesFile).

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/whatif"
)

// errRankingMoved: the rule set the link expects is no longer ranked.
var errRankingMoved = errors.New("the ranking changed since the page was drawn (new records): reload the page")

// rulesFile answers /whatif/rules.txt: the page's parameters (rules, range,
// class, priority, model) and rank=N, the Nth entry of the page's ranking
// (none: the rules evaluated).
func (h *whatIfHandler) rulesFile(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	body, name, err := h.exportRules(c)
	if err != nil {
		status := http.StatusInternalServerError
		if errors.As(err, new(badRequest)) {
			status = http.StatusBadRequest
		}
		if errors.Is(err, errRankingMoved) {
			status = http.StatusConflict
		}
		c.String(status, "%s\n", err.Error())
		return
	}
	c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
	c.Data(http.StatusOK, "text/plain; charset=utf-8", body)
}

// exportRules builds the file and its name (made of the rank alone: no
// captured string goes into a header).
func (h *whatIfHandler) exportRules(c *gin.Context) ([]byte, string, error) {
	rank := 0
	if v := c.Query("rank"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, "", badRequest{fmt.Errorf("rank=%q: want a rank from 1", v)}
		}
		rank = n
	}
	resp, err := h.answer(c)
	if err != nil {
		return nil, "", err
	}
	if resp.ParseError != nil {
		return nil, "", badRequest{fmt.Errorf("the rules do not parse: %s", resp.Error)}
	}
	e := whatif.Export{Rank: rank, Source: "the store's records, read by rtmon's what-if page"}
	name := "rtmon-whatif-rules.txt"
	src := strings.Join(resp.Rules, "\n")
	if rank > 0 {
		// The page's link also names the rules it showed (expect=): on a
		// live store the ranking may have moved since the page was drawn.
		at := func(i int) string { return strings.Join(resp.Ranking[i].Rules, "\n") }
		if want, ok := c.GetQuery("expect"); ok && (rank > len(resp.Ranking) || at(rank-1) != want) {
			i := slices.IndexFunc(resp.Ranking, func(r whatif.Ranked) bool { return strings.Join(r.Rules, "\n") == want })
			if i < 0 {
				return nil, "", errRankingMoved
			}
			rank, e.Rank = i+1, i+1
		}
		if rank > len(resp.Ranking) {
			return nil, "", badRequest{fmt.Errorf("rank=%d: the ranking has %d entries", rank, len(resp.Ranking))}
		}
		pick := resp.Ranking[rank-1]
		e.Ranked, src = &pick, strings.Join(pick.Rules, "\n")
		name = "rtmon-whatif-rank-" + strconv.Itoa(rank) + ".txt"
	}
	if e.Rules, err = whatif.ParseRules(src); err != nil {
		return nil, "", fmt.Errorf("whatif export: %w", err)
	}
	sensor, err := sensorParam(c)
	if err != nil {
		return nil, "", err
	}
	data, err := h.data(c.Request.Context(), rangeFrom(c), sensor)
	if err != nil {
		return nil, "", err
	}
	opts := whatif.Options{Priorities: resp.Priorities, Edges: histEdges, ServerModel: resp.ServerModel,
		ReportDelay: data.ds.LiveReportDelay()}
	if e.Result, err = data.ds.Evaluate(e.Rules, opts); err != nil {
		return nil, "", fmt.Errorf("whatif export: %w", err)
	}
	e.From, e.To = data.ds.Span()
	e.Transactions, e.Pageviews, e.Connections = resp.Loaded.Transactions, resp.Loaded.Pageviews, resp.Loaded.Connections
	var b bytes.Buffer
	if err := whatif.WriteRulesFile(&b, e); err != nil {
		return nil, "", err
	}
	return b.Bytes(), name, nil
}
