package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rtmon/rtmon/export"
	"github.com/rtmon/rtmon/pageview"
	"github.com/rtmon/rtmon/reconstruct"
	"github.com/rtmon/rtmon/store/query"
)

// exportPage is how many rows one store query returns while exporting.
const exportPage = 10000

// eachMatch pages through every match of q (ignoring its page) up to limit
// rows, newest first. Pages are keyed by offset, so rows stored while the
// export runs may shift the pages; an export is a snapshot, not a cursor.
func eachMatch(ctx context.Context, st query.Querier, q query.SearchQuery, limit int, fn func(query.SearchResult) error) error {
	q.Offset, q.Limit = 0, exportPage
	for q.Offset < limit {
		q.Limit = min(exportPage, limit-q.Offset)
		res, err := st.Search(ctx, q)
		if err != nil {
			return fmt.Errorf("export search at row %d: %w", q.Offset, err)
		}
		if err := fn(res); err != nil {
			return err
		}
		n := len(res.Transactions) + len(res.Pageviews)
		q.Offset += n
		if n < q.Limit || int64(q.Offset) >= res.Total {
			return nil
		}
	}
	return nil
}

func exportName(q query.SearchQuery, ext string) string {
	return fmt.Sprintf("rtmon-%s-%s.%s", q.Kind, time.Now().UTC().Format("20060102-150405"), ext)
}

func attachment(c *gin.Context, name, ctype string) {
	c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
	c.Header("Content-Type", ctype)
	c.Header("Cache-Control", "no-store")
}

// exportRun is one export's search, read under partialContext: with a
// cluster shard down the file holds the other shards' records and says so
// (the X-Rtmon-Missing-Shards header; the JSON's missing_shards).
type exportRun struct {
	q       query.SearchQuery
	ctx     context.Context
	partial *query.Partial
	// announced: the shards the header named before the first byte.
	announced []int
}

// checkShards fails the export when a shard went down after the header
// named the missing ones: the file would lack records it does not say it
// lacks, so it ends early instead (truncated, as any failed export).
func (e *exportRun) checkShards() error {
	if now := missingShards(e.partial); len(now) > len(e.announced) {
		return fmt.Errorf("export: %s went down while exporting", shardsText(now))
	}
	return nil
}

func (s *Server) exportQuery(c *gin.Context) (*exportRun, bool) {
	ctx, partial := partialContext(c.Request.Context(), s.cfg.Store)
	q, err := searchParams(c, func() (extent, error) { return dataExtent(ctx, s.cfg.Store) })
	if err != nil {
		bad(c, err)
		return nil, false
	}
	// Check the filters before the first byte, so errors are real statuses.
	probe := q
	probe.Offset, probe.Limit = 0, 1
	if _, err := s.cfg.Store.Search(ctx, probe); err != nil {
		bad(c, fmt.Errorf("search: %w", err))
		return nil, false
	}
	e := &exportRun{q: q, ctx: ctx, partial: partial, announced: missingShards(partial)}
	if len(e.announced) > 0 {
		c.Header("X-Rtmon-Missing-Shards", shardList(e.announced))
	}
	return e, true
}

// exportSearchCSV writes the matches in export's CSV layout, the one of
// the record files rtmon analyze writes.
func (s *Server) exportSearchCSV(c *gin.Context) {
	e, ok := s.exportQuery(c)
	if !ok {
		return
	}
	attachment(c, exportName(e.q, "csv"), "text/csv; charset=utf-8")
	var err error
	if e.q.Kind == query.Pageviews {
		err = writeCSV(c, s, e, export.PageviewCSV, func(res query.SearchResult) []*pageview.Pageview { return res.Pageviews })
	} else {
		err = writeCSV(c, s, e, export.TransactionCSV, func(res query.SearchResult) []*reconstruct.Transaction { return res.Transactions })
	}
	if err != nil {
		// The status is sent; a truncated file is all we can signal.
		s.cfg.Logger.Warn("csv export ended early", "err", err)
	}
}

// writeCSV pages through q's matches, records picks each page's records.
func writeCSV[T any](c *gin.Context, s *Server, e *exportRun, newCSV func(io.Writer) (*export.CSVWriter[T], error), records func(query.SearchResult) []T) error {
	w, err := newCSV(c.Writer)
	if err != nil {
		return err
	}
	err = eachMatch(e.ctx, s.cfg.Store, e.q, s.cfg.MaxExportRows, func(res query.SearchResult) error {
		if err := e.checkShards(); err != nil {
			return err
		}
		for _, r := range records(res) {
			if err := w.Write(r); err != nil {
				return err
			}
		}
		return w.Flush()
	})
	return errors.Join(err, w.Flush())
}

func (s *Server) exportSearchJSON(c *gin.Context) {
	e, ok := s.exportQuery(c)
	if !ok {
		return
	}
	attachment(c, exportName(e.q, "json"), "application/json")
	bw := bufio.NewWriterSize(c.Writer, 64<<10)
	enc := json.NewEncoder(bw)
	first := true
	fmt.Fprintf(bw, "{\"kind\":%q,\"records\":[\n", e.q.Kind)
	item := func(v any) error {
		if !first {
			bw.WriteString(",")
		}
		first = false
		return enc.Encode(v)
	}
	err := eachMatch(e.ctx, s.cfg.Store, e.q, s.cfg.MaxExportRows, func(res query.SearchResult) error {
		if err := e.checkShards(); err != nil {
			return err
		}
		for _, t := range res.Transactions {
			if err := item(t); err != nil {
				return err
			}
		}
		for _, p := range res.Pageviews {
			if err := item(p); err != nil {
				return err
			}
		}
		return nil
	})
	bw.WriteString("]")
	switch {
	case err != nil:
		// The status is sent: the file says it ended early.
		m, _ := json.Marshal(err.Error())
		fmt.Fprintf(bw, ",\"error\":%s", m)
	case len(e.announced) > 0:
		// Known before the first record and unchanged since (checkShards).
		m, _ := json.Marshal(e.announced)
		fmt.Fprintf(bw, ",\"missing_shards\":%s", m)
	}
	bw.WriteString("}\n")
	_ = bw.Flush()
	if err != nil {
		s.cfg.Logger.Warn("json export ended early", "err", err)
	}
}

func (s *Server) exportHAR(c *gin.Context) {
	id := strings.TrimSuffix(c.Param("id"), ".har")
	det, ok := s.pageviewByID(c, id)
	if !ok {
		return
	}
	conns := make(map[string]*reconstruct.Connection, len(det.Connections))
	for _, cn := range det.Connections {
		conns[cn.ID] = cn
	}
	var buf bytes.Buffer
	if err := export.WriteHAR(&buf, det.Pageview, det.Transactions, conns); err != nil {
		fail(c, fmt.Errorf("har: %w", err))
		return
	}
	attachment(c, "rtmon-pageview-"+safeName(id)+".har", "application/json")
	c.Data(http.StatusOK, "application/json", buf.Bytes())
}

// safeName keeps ids (which we make, but from URLs) tame in file names.
func safeName(s string) string {
	b := []byte(s)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}
